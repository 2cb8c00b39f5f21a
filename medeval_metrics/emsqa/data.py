"""EMSQA data: the public and private sources, record validation and the lm-eval ``custom_dataset`` loaders."""

from __future__ import annotations

import functools
import json
import logging
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from medeval_metrics.data import (
    DataSource,
    MedevalDataError,
    check_known_checksum,
    collector_paused,
    download_hub_file,
    file_sha256,
    read_json_records,
    record_scored_data,
    refuse_wrong_file_kind,
    setting,
    validated_dataset,
)
from medeval_metrics.settings import flag_option

log = logging.getLogger("medeval_metrics.emsqa")

LEVELS = ("emr", "emt", "aemt", "paramedic")
SUBJECT_AREAS = (
    "airway_respiration_and_ventilation",
    "anatomy",
    "assessment",
    "cardiology_and_resuscitation",
    "ems_operations",
    "medical_and_obstetrics_gynecology",
    "others",
    "pediatrics",
    "pharmacology",
    "trauma",
)
LEVEL_NAMES = {
    "emr": "Emergency Medical Responder (EMR)",
    "emt": "Emergency Medical Technician (EMT)",
    "aemt": "Advanced EMT (AEMT)",
    "paramedic": "Paramedic",
}
_CHOICE_PREFIX = re.compile(r"^\s*\(?([a-zA-Z])[.)]\s?")

PUBLIC_SOURCE = DataSource(
    key="emsqa_public_path",
    description="the EMSQA public set",
    how_to_get=(
        "Download test_open.json and val_open.json from the authors' repository "
        "(github.com/UVA-DSA/EMSQA, data/final/) or the Hub dataset Xueren/EMS-MCQA, "
        "and point the pack at the folder holding them (or at test_open.json itself)."
    ),
    hub_repo="Xueren/EMS-MCQA",
    sha256={
        "test_open.json": "53e225049d0deb9b57da30cc1569844762fdd3d97bce9137eb8f410d4b4b9847",
        "val_open.json": "76f1604950934b98087cb7cd9a88715c7cffbf931f8e7f0178e5d3266373c774",
    },
)
PRIVATE_SOURCE = DataSource(
    key="emsqa_private_path",
    description="the EMSQA private set",
    how_to_get=(
        "The private set is not public: use your own copy, a JSON/JSON Lines file of records in the "
        "public schema (question, choices, answer, level, category)."
    ),
)


def normalise_record(record: dict[str, Any], index: int, path: Path | str) -> dict[str, Any]:
    """Validate one raw record and return the doc the tasks use; raises MedevalDataError naming it.

    The doc keeps the raw fields and adds ``letters`` (the option letters, from each choice's
    ``"x. "`` prefix), ``options`` (choice texts without prefix, in letter order) and ``gold``
    (the sorted answer letters). Answer letters must be among the item's letters.
    """
    where = f"{path}: record {index}"
    question = record.get("question")
    snippet = f" ({question[:60]!r})" if isinstance(question, str) else ""
    for field in ("question", "choices", "answer"):
        if field not in record:
            raise MedevalDataError(
                f"{where}{snippet} has no '{field}' field (it has {sorted(record)}). "
                "Every record needs question, choices, answer; check the field names' spelling."
            )
    if not isinstance(question, str):
        raise MedevalDataError(f"{where}: 'question' is a {type(question).__name__}, not text. Fix the record.")
    if not question.strip():
        raise MedevalDataError(f"{where} has an empty question. Fix or remove the record.")
    choices = record["choices"]
    if not isinstance(choices, list) or len(choices) < 2:
        raise MedevalDataError(f"{where}{snippet}: 'choices' must be a list of at least 2 strings like \"a. text\".")
    options: dict[str, str] = {}
    for position, choice in enumerate(choices):
        if not isinstance(choice, str):
            raise MedevalDataError(f"{where}{snippet}: choice {position} is a {type(choice).__name__}, not a string.")
        match = _CHOICE_PREFIX.match(choice)
        letter = match.group(1).lower() if match else None
        text = choice[match.end() :].strip() if match else choice.strip()
        if letter is None:
            raise MedevalDataError(
                f'{where}{snippet}: choice {position} ({choice[:40]!r}) does not start with its letter, e.g. "a. ".'
            )
        if not text:
            raise MedevalDataError(f"{where}{snippet}: choice {letter!r} is empty. Fill it in or remove the record.")
        if letter in options:
            raise MedevalDataError(f"{where}{snippet}: letter {letter!r} is used by two choices.")
        options[letter] = text
    answer = record["answer"]
    letters_given = re.findall(r"[a-z]", answer.lower()) if isinstance(answer, str) else []
    if len(letters_given) > 1 and set(letters_given) <= set(options) and re.fullmatch(r"[\sa-zA-Z,;/&]+", answer):
        raise MedevalDataError(
            f"{where}{snippet}: 'answer' is the text {answer!r}; a multi-answer is a list of letters: "
            f'"answer": {json.dumps(letters_given)} (a single answer may be a letter, "answer": "b").'
        )
    answers = [answer] if isinstance(answer, str) else answer
    if not isinstance(answers, list) or not answers or not all(isinstance(a, str) and a.strip() for a in answers):
        raise MedevalDataError(
            f"{where}{snippet}: 'answer' must be a letter or a non-empty list of letters, got {answer!r}."
        )
    gold = sorted({a.strip().lower() for a in answers})
    outside = [a for a in gold if a not in options]
    if outside:
        raise MedevalDataError(
            f"{where}{snippet}: answer {outside} is not among the item's choices {sorted(options)}. Fix the answer."
        )
    letters = sorted(options)
    level = record.get("level", [])
    category = record.get("category", [])
    for field, value in (("level", level), ("category", category)):
        if (
            value is not None
            and not isinstance(value, str)
            and not (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            raise MedevalDataError(
                f"{where}{snippet}: '{field}' is {value!r}; it must be a string or a list of strings (e.g. [\"emt\"])."
            )
    return {
        "id": str(record.get("id", index)),
        "question": question.strip(),
        "choices": list(choices),
        "letters": letters,
        "options": [options[letter] for letter in letters],
        "gold": gold,
        "answer": json.dumps(gold),
        "level": [level] if isinstance(level, str) else list(level or []),
        "category": [category] if isinstance(category, str) else list(category or []),
        "explanation": str(record.get("explanation") or ""),
        "link": str(record.get("link") or ""),
    }


ALLOW_DUPLICATES_KEY = "emsqa_allow_duplicates"
_RECORD_SHAPE = (
    'JSON (a list of records) or JSON Lines (one record per line), each record like {"question": "...", '
    '"choices": ["a. ...", "b. ..."], "answer": ["b"]} (a multi-answer lists its letters: ["a", "c"])'
)


def _check_file_kind(path: Path, description: str) -> None:
    """A clear error for a file of the wrong kind (a workbook, a CSV, a folder...), before it is read as JSON."""
    refuse_wrong_file_kind(path, description, {"json", "text"}, _RECORD_SHAPE, (".json", ".jsonl"))


def allow_duplicates(metadata: dict[str, Any]) -> bool:
    """The opt-out for sets that really repeat a question: metadata key or MEDEVAL_EMSQA_ALLOW_DUPLICATES."""
    return flag_option(metadata, ALLOW_DUPLICATES_KEY)


def _item_key(record: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    question, choices = record.get("question"), record.get("choices")
    if not isinstance(question, str) or not isinstance(choices, list):
        return None
    return " ".join(question.lower().split()), tuple(" ".join(str(c).lower().split()) for c in choices)


def load_docs(
    path: Path, description: str, skip_invalid: bool = False, allow_duplicates: bool = False
) -> list[dict[str, Any]]:
    """Read and validate a file of EMSQA records.

    ``skip_invalid`` is only for a few-shot pool: invalid records are left out with one notice that
    names each (the public validation set has one item with an empty choice). Scored splits are
    always strict. Two records with the same question and choices (a file concatenated with
    itself) are an error naming both, unless ``allow_duplicates``.
    """
    with collector_paused():
        return _load_docs(path, description, skip_invalid, allow_duplicates)


def _load_docs(
    path: Path, description: str, skip_invalid: bool = False, allow_duplicates: bool = False
) -> list[dict[str, Any]]:
    _check_file_kind(path, description)
    docs = []
    left_out: list[str] = []
    first_with_id: dict[str, int] = {}
    first_with_item: dict[tuple[str, tuple[str, ...]], int] = {}
    for index, record in enumerate(read_json_records(path, description, record_fields=("question",))):
        # Duplicate explicit ids would merge two items in per-item logs and breakdowns: never allowed.
        if record.get("id") is not None:
            record_id = str(record["id"])
            if record_id in first_with_id:
                raise MedevalDataError(
                    f"{path}: records {first_with_id[record_id]} and {index} of {description} share the id "
                    f"{record_id!r}. Give every record its own id (or drop the 'id' field to number them by position)."
                )
            first_with_id[record_id] = index
        key = None if allow_duplicates else _item_key(record)
        if key is not None:
            if key in first_with_item:
                raise MedevalDataError(
                    f"{path}: records {first_with_item[key]} and {index} of {description} have the same question "
                    f"and choices ({record['question'][:60]!r}); the file may hold a copy of itself. Remove the "
                    f"repeat, or set {ALLOW_DUPLICATES_KEY}: true if the set really repeats that question."
                )
            first_with_item[key] = index
        try:
            docs.append(normalise_record(record, index, path))
        except MedevalDataError as exc:
            if not skip_invalid:
                raise
            left_out.append(f"record {index} ({_problem(str(exc), index)})")
    if left_out:
        import sys

        from tqdm import tqdm

        # the pool is read while lm-eval's progress bar is drawn: the bar is cleared for the notice and redrawn
        # after it, so that the notice starts on its own line
        with tqdm.external_write_mode(file=sys.stderr):
            log.warning(
                "medeval: %s as published has %s that cannot serve as a few-shot example, left out of the pool: %s.",
                Path(path).name,
                "1 record" if len(left_out) == 1 else f"{len(left_out)} records",
                "; ".join(left_out),
            )
    return docs


def _problem(message: str, index: int) -> str:
    """The fact in a validation message, without the file name or the advice to fix it."""
    after = message.split(f"record {index}", 1)[-1]
    after = re.sub(r"^\s*(?:\('(?:[^'\\]|\\.)*'\)|\(\"(?:[^\"\\]|\\.)*\"\))?\s*:?\s*", "", after)
    return after.split(". ")[0].rstrip(".")


class DeferredPool(Sequence):
    """A few-shot pool read and validated on first use: a zero-shot run never reads it.

    lm-eval lists the few-shot split when it builds a task, before the shot count is known, so the
    task YAML hands the pool to the sampler unread (``fewshot_pool``) and ``DeferredFirstNSampler``
    reads it when examples are drawn.
    """

    def __init__(self, path: Path, description: str, allow_duplicates: bool = False) -> None:
        self.path, self.description, self.allow_duplicates = Path(path), description, allow_duplicates
        self._docs: tuple[dict[str, Any], ...] | None = None

    def docs(self) -> tuple[dict[str, Any], ...]:
        if self._docs is None:
            stat = self.path.stat()
            self._docs = _read_pool(
                str(self.path), stat.st_mtime_ns, stat.st_size, self.description, self.allow_duplicates
            )
        return self._docs

    def __len__(self) -> int:
        return len(self.docs())

    def __getitem__(self, index):  # type: ignore[override]
        return self.docs()[index]

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.docs())


@functools.lru_cache(maxsize=4)
def _read_pool(path: str, mtime_ns: int, size: int, description: str, allow_duplicates: bool):
    # Keyed by the file's version: the four public variants of one run share one reading (and one
    # notice about records left out), and an edited file is read again.
    return tuple(load_docs(Path(path), description, skip_invalid=True, allow_duplicates=allow_duplicates))


def fewshot_pool(docs: Any) -> Any:
    """``fewshot_config.process_docs``: a deferred pool goes to the sampler unread, wrapped in a list; a RAG
    task's own items (the private tasks) as examples without documents (``RetrievedSplit.example_docs``)."""
    if isinstance(docs, DeferredPool):
        return [docs]
    examples = getattr(docs, "example_docs", None)
    return examples() if callable(examples) else docs


def _deferred_sampler_class():
    from lm_eval.api.samplers import FirstNSampler

    class DeferredFirstNSampler(FirstNSampler):
        """lm-eval's ``first_n`` sampler over a pool that is read on the first draw."""

        def sample(self, n: int, eval_doc=None, df=None, **kwargs):
            if n > 0 and len(self.df) == 1 and isinstance(self.df[0], DeferredPool):
                self.df = list(self.df[0])
            return super().sample(n, eval_doc=eval_doc, df=df, **kwargs)

        @staticmethod
        def rm_eval_doc(doc, _iter, n=None):
            # by id, not by equality: a RAG item's example copy lacks the documents its eval doc has
            key = doc.get("id") if isinstance(doc, dict) else None
            kept = [x for x in _iter if (x.get("id") != key if key is not None and isinstance(x, dict) else x != doc)]
            return kept if n is None else kept[:n]

    DeferredFirstNSampler.__module__ = __name__
    DeferredFirstNSampler.__qualname__ = "DeferredFirstNSampler"  # named in results JSON without "<locals>"
    return DeferredFirstNSampler


def __getattr__(name: str) -> Any:
    # The sampler subclasses lm-eval's; built on first use so importing the pack does not import lm-eval.
    if name == "DeferredFirstNSampler":
        cls = _deferred_sampler_class()
        globals()[name] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _no_test_file(folder: Path, depth: int = 3) -> str:
    """The error for a folder without test_open.json: the subfolder that holds one when there is (a parent of
    the data folder given, e.g. the repository's root instead of its data/final/), else where to get it."""
    level, found = [folder], []
    for _ in range(depth):  # breadth first, a few levels: the nearest copy, without walking a whole disk
        level = sorted(p for parent in level for p in _subfolders(parent))
        found = [p for p in level if (p / "test_open.json").is_file()]
        if found or not level:
            break
    if found:
        also = f" (also in {', '.join(str(p) for p in found[1:3])})" if len(found) > 1 else ""
        return f"{folder}: no test_open.json in this folder, but {found[0]} holds one{also}: point the pack at that folder."
    return f"{folder}: no test_open.json in this folder or the ones under it. {PUBLIC_SOURCE.how_to_get}"


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return []


def _public_files(metadata: dict[str, Any]) -> tuple[Path, Path | None]:
    """(test file, validation file or None) from the local setting or the Hub."""
    local = PUBLIC_SOURCE.local_path(metadata)
    if local is not None:
        if local.is_dir():
            test = next((p for p in (local / "test_open.json", local / "test.json") if p.exists()), None)
            if test is None:
                raise MedevalDataError(_no_test_file(local))
            val = next((p for p in (local / "val_open.json", local / "validation.json") if p.exists()), None)
            # a folder's file is compared with the pins like a named one, also when it comes from the
            # data cache (the JSON reader checks the files it reads: the validation file when drawn from)
            check_known_checksum(test)
            return test, val
        sibling = local.parent / "val_open.json"
        return local, sibling if sibling.exists() and sibling != local else None
    revision = setting(metadata, "emsqa_revision")
    test = download_hub_file(PUBLIC_SOURCE, ["test_open.json"], revision)
    check_known_checksum(test)  # here too: a cache hit never reads the file
    try:
        val = download_hub_file(PUBLIC_SOURCE, ["val_open.json"], revision)
    except MedevalDataError:
        val = None
    return test, val


def doc_schema():
    """The Arrow schema of a validated doc (``normalise_record``'s output), stated so that a file whose
    items all lack levels still gets list-of-string columns."""
    import pyarrow as pa

    text, texts = pa.string(), pa.list_(pa.string())
    return pa.schema(
        [
            ("id", text),
            ("question", text),
            ("choices", texts),
            ("letters", texts),
            ("options", texts),
            ("gold", texts),
            ("answer", text),
            ("level", texts),
            ("category", texts),
            ("explanation", text),
            ("link", text),
        ]
    )


def _dataset(path: Path, description: str, duplicates_ok: bool, cache: bool):
    """The validated test split as a Dataset (the public set is kept validated between runs:
    ``medeval_metrics.data.validated_dataset``), recorded in the results as the scored file."""
    digest = file_sha256(path)  # read once: the cache key and the results' record
    dataset = validated_dataset(
        path,
        {"allow_duplicates": duplicates_ok},
        lambda: load_docs(path, description, allow_duplicates=duplicates_ok),
        schema=doc_schema(),
        code_files=(Path(__file__),),
        cache=cache,
        sha256=digest,
    )
    record_scored_data(description, [{"file": path.name, "sha256": digest}], len(dataset))
    return dataset


class EmsqaSplits(dict):
    """What the loaders return: ``{"test": Dataset, "validation": DeferredPool}``; lm-eval indexes it
    like a DatasetDict (it only looks splits up by name)."""


def load_public(**metadata: Any):
    """``custom_dataset`` for the public set: test split scored, validation as the (deferred) few-shot pool."""
    test_path, val_path = _public_files(metadata)
    duplicates_ok = allow_duplicates(metadata)
    from medeval_metrics.emsqa import fallback

    # the opt-in extraction model's config, checked now (before any generation), held here; its key on the documents
    splits = EmsqaSplits(
        test=fallback.stamp(_dataset(test_path, "the EMSQA public test set", duplicates_ok, cache=True), metadata)
    )
    if val_path is not None:
        splits["validation"] = DeferredPool(val_path, "the EMSQA public validation set", duplicates_ok)
    else:
        splits["validation"] = NoValidationPool(test_path)
    return splits


class NoValidationPool(DeferredPool):
    """The few-shot pool of a public test file with no validation file beside it. Drawing from it is an
    error: examples from the test set itself would show an item its own answer (lm-eval leaves the
    evaluated item in a pool that is not the test split), so zero-shot runs go on and few-shot ones stop."""

    def __init__(self, test_path: Path) -> None:
        super().__init__(test_path, "the EMSQA public test set")

    def docs(self) -> tuple[dict[str, Any], ...]:
        raise MedevalDataError(
            f"{self.path}: no EMSQA validation file (val_open.json) beside it, so there is no pool for few-shot "
            "examples (the test items would show their own answers). Put the published val_open.json next to "
            "it, or run zero-shot (--num_fewshot 0)."
        )


def load_private(**metadata: Any):
    """``custom_dataset`` for the user's private set (few-shot examples are other private items)."""
    path = PRIVATE_SOURCE.local_path(metadata)
    if path is None:
        raise PRIVATE_SOURCE.missing("no file was given")
    if path.is_dir():
        raise MedevalDataError(
            f"{path} is a folder; {PRIVATE_SOURCE.key} must name the private set's file ({_RECORD_SHAPE})."
        )
    # Not cached: a copy of an unreleased exam set under ~/.cache is a copy the user did not ask for.
    from medeval_metrics.emsqa import fallback

    dataset = _dataset(path, "the EMSQA private set", allow_duplicates(metadata), cache=False)
    return EmsqaSplits(test=fallback.stamp(dataset, metadata))
