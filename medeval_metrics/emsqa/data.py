"""EMSQA data: the public and private sources, record validation and the lm-eval ``custom_dataset`` loaders."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from medeval_metrics.data import DataSource, MedevalDataError, download_hub_file, read_json_records

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
LEVEL_NAMES = {"emr": "Emergency Medical Responder (EMR)", "emt": "Emergency Medical Technician (EMT)",
               "aemt": "Advanced EMT (AEMT)", "paramedic": "Paramedic"}
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
)
PRIVATE_SOURCE = DataSource(
    key="emsqa_private_path",
    description="the EMSQA private set",
    how_to_get=(
        "The private set is not public: use your own copy, a JSON/JSON Lines file of records in the "
        "public schema (question, choices, answer, level, category)."
    ),
)


def normalize_record(record: dict[str, Any], index: int, path: Path | str) -> dict[str, Any]:
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
        text = choice[match.end():].strip() if match else choice.strip()
        if letter is None:
            raise MedevalDataError(
                f"{where}{snippet}: choice {position} ({choice[:40]!r}) does not start with its letter, e.g. \"a. \"."
            )
        if not text:
            raise MedevalDataError(f"{where}{snippet}: choice {letter!r} is empty. Fill it in or remove the record.")
        if letter in options:
            raise MedevalDataError(f"{where}{snippet}: letter {letter!r} is used by two choices.")
        options[letter] = text
    answer = record["answer"]
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
        if value is not None and not isinstance(value, str) and not (
            isinstance(value, list) and all(isinstance(v, str) for v in value)
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


def load_docs(path: Path, description: str, skip_invalid: bool = False) -> list[dict[str, Any]]:
    """Read and validate a file of EMSQA records.

    ``skip_invalid`` is only for a few-shot pool: invalid records are left out with a warning that
    names each one (the public validation set has one item with an empty choice). Scored splits are
    always strict.
    """
    docs = []
    first_with_id: dict[str, int] = {}
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
        try:
            docs.append(normalize_record(record, index, path))
        except MedevalDataError as exc:
            if not skip_invalid:
                raise
            log.warning("medeval: left out of the few-shot pool: %s", exc)
    return docs


def _public_files(metadata: dict[str, Any]) -> tuple[Path, Path | None]:
    """(test file, validation file or None) from the local setting or the Hub."""
    local = PUBLIC_SOURCE.local_path(metadata)
    if local is not None:
        if local.is_dir():
            test = next((p for p in (local / "test_open.json", local / "test.json") if p.exists()), None)
            if test is None:
                raise MedevalDataError(
                    f"{local}: no test_open.json in this folder. {PUBLIC_SOURCE.how_to_get}"
                )
            val = next((p for p in (local / "val_open.json", local / "validation.json") if p.exists()), None)
            return test, val
        sibling = local.parent / "val_open.json"
        return local, sibling if sibling.exists() and sibling != local else None
    revision = metadata.get("emsqa_revision")
    test = download_hub_file(PUBLIC_SOURCE, ["test_open.json"], revision)
    try:
        val = download_hub_file(PUBLIC_SOURCE, ["val_open.json"], revision)
    except MedevalDataError:
        val = None
    return test, val


def _dataset_dict(splits: dict[str, list[dict[str, Any]]]):
    import datasets

    return datasets.DatasetDict({name: datasets.Dataset.from_list(docs) for name, docs in splits.items()})


def load_public(**metadata: Any):
    """``custom_dataset`` for the public set: test split scored, validation as the few-shot pool."""
    from medeval_metrics import redact

    redact.install()  # task building is an entry point: keys are redacted before the first request
    test_path, val_path = _public_files(metadata)
    test = load_docs(test_path, "the EMSQA public test set")
    splits = {"test": test}
    if val_path is not None:
        splits["validation"] = load_docs(val_path, "the EMSQA public validation set", skip_invalid=True)
    else:
        log.warning("medeval: no EMSQA validation file found next to %s; few-shot examples come from the test set", test_path)
        splits["validation"] = test
    return _dataset_dict(splits)


def load_private(**metadata: Any):
    """``custom_dataset`` for the user's private set (few-shot examples are other private items)."""
    from medeval_metrics import redact

    redact.install()  # task building is an entry point: keys are redacted before the first request
    path = PRIVATE_SOURCE.local_path(metadata)
    if path is None:
        raise PRIVATE_SOURCE.missing("no file was given")
    if path.is_dir():
        raise MedevalDataError(f"{path} is a folder; {PRIVATE_SOURCE.key} must name the private set's file.")
    return _dataset_dict({"test": load_docs(path, "the EMSQA private set")})


