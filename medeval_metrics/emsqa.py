"""EMSQA (Ge et al. 2025, arXiv:2511.10900): loaders, prompts, answer extraction and set metrics.

Items may have several correct options, so an answer is a *set* of letters. The paper's metrics:
``acc`` is exact set match; ``f1`` is per-item set F1 (both sets empty scores 1, exactly one empty
scores 0), averaged over items. lm-eval's own multiple-target scoring counts "any gold letter" as
correct, which is wrong for multi-answer items, so every variant here scores through
``process_results``.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from medeval_metrics.data import DataSource, MedevalDataError, download_hub_file, read_json_records

log = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------- data


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
    for index, record in enumerate(read_json_records(path, description)):
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
    path = PRIVATE_SOURCE.local_path(metadata)
    if path is None:
        raise PRIVATE_SOURCE.missing("no file was given")
    if path.is_dir():
        raise MedevalDataError(f"{path} is a folder; {PRIVATE_SOURCE.key} must name the private set's file.")
    return _dataset_dict({"test": load_docs(path, "the EMSQA private set")})


# --------------------------------------------------------------------------- prompts


def _options_block(doc: dict[str, Any]) -> str:
    return "\n".join(f"{letter.upper()}. {text}" for letter, text in zip(doc["letters"], doc["options"]))


def doc_to_text(doc: dict[str, Any]) -> str:
    """Zero-/few-shot prompt: the answer is a JSON list of lowercase letters (the authors' format)."""
    return (
        f"Question: {doc['question']}\n{_options_block(doc)}\n"
        "One or more options may be correct. Reply with a JSON list of the lowercase letters of all "
        'correct options, e.g. ["b"] or ["a", "c"].\nAnswer:'
    )


def doc_to_target(doc: dict[str, Any]) -> str:
    return json.dumps(doc["gold"])


def doc_to_text_cot(doc: dict[str, Any]) -> str:
    return (
        f"Question: {doc['question']}\n{_options_block(doc)}\n"
        "One or more options may be correct. Think step by step, then finish with the final answer as "
        'a JSON object on its own line, e.g. {"answer": ["b"]} or {"answer": ["a", "c"]}.\n'
    )


def expert_standpoint(doc: dict[str, Any]) -> str:
    levels = " and ".join(LEVEL_NAMES.get(level, level) for level in doc["level"]) or "EMS provider"
    areas = ", ".join(area.replace("_", " ") for area in doc["category"]) or "general EMS practice"
    return f"You are a certified {levels} answering a certification exam question on {areas}."


def doc_to_text_expert_cot(doc: dict[str, Any]) -> str:
    """Expert-CoT (the paper's method): the prompt states the certification level and subject area(s)."""
    return (
        f"{expert_standpoint(doc)} Reason from that standpoint, following the protocols and scope of "
        f"practice of that level.\n\n{doc_to_text_cot(doc)}"
    )


def doc_to_target_cot(doc: dict[str, Any]) -> str:
    return json.dumps({"answer": doc["gold"]})


def doc_to_text_mc(doc: dict[str, Any]) -> str:
    return f"Question: {doc['question']}\n{_options_block(doc)}\nAnswer:"


def doc_to_choice_mc(doc: dict[str, Any]) -> list[str]:
    return [letter.upper() for letter in doc["letters"]]


def doc_to_target_mc(doc: dict[str, Any]) -> int:
    # Few-shot examples show the first gold letter; scoring uses the full gold set (process_results_mc).
    return doc["letters"].index(doc["gold"][0])


# --------------------------------------------------------------------------- answer extraction

_THINK_BLOCK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
_LETTER_IN_LIST = r"\s*[\"'`]?\s*([a-zA-Z])\s*[\"'`]?\s*"
_JSON_LIST = re.compile(r"\[((?:" + _LETTER_IN_LIST + r",)*" + _LETTER_IN_LIST + r")?\]")
_ANSWER_FIELD = re.compile(
    r"[\"']?(?:final[_ ])?answers?[\"']?\s*:\s*(\[[^\[\]]{0,200}\]|[\"'][a-zA-Z][\"'])", re.IGNORECASE
)
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{)?([^{}]{1,40}?)\}?\s*\}")
# A letter token in running text: "(b)", "b)", "B", "b." -- a lowercase letter followed by a word
# ("the answer is a fracture") is an article, not an answer.
_TOKEN = (
    r"(?:\(\s*([a-fA-F])\s*\)|(?<![A-Za-z0-9])([A-F])(?![A-Za-z0-9'’-])"
    r"|(?<![A-Za-z0-9])([a-f])(?=\s*(?:$|[.,;:!)\]*]|\band\b|&|\n)))"
)
# The separator gives each space exactly one place to match (", and" as one unit), and the list is
# capped at 16 tokens (options run a-f): an ambiguous or unbounded list made "**A, **A, ..." take
# exponential time (110 characters: 9 s) and 1 MB outputs quadratic time.
_TOKEN_LIST = _TOKEN + r"(?:\s*(?:,(?:\s*(?i:and)\b)?|\b(?i:and)\b|&|/|\+)\s*\**" + _TOKEN + r"){0,15}"
# Keywords are matched case-insensitively, letter tokens case-sensitively (see _TOKEN).
_PHRASE = re.compile(
    r"(?i:(?:(?:correct|right|best|final)\s+)?(?:answers?|options?|choices?|responses?)\s*"
    r"(?:is|are|would be|will be|should be|:|=|-)\s*(?:options?|choices?|letters?)?)\s*[:\-]?\s*\**\s*("
    + _TOKEN_LIST
    + r")"
)
# Inside one bold span the list has no further asterisks, so each "**" start is checked in
# constant time ("**A, **A, ..." over 1 MB: 1.6 s with them, see scripts/bench_hardening.py).
_BOLD = re.compile(r"\*\*\s*(" + _TOKEN_LIST.replace(r"\s*\**", r"\s*") + r")\s*[.):]?\s*\*\*")
_WHOLE = re.compile(r"^\W*(" + _TOKEN_LIST + r")\W*$")
_LEADING = re.compile(r"^\s*(?:\*\*)?\s*\(?([a-fA-F])[.)]\s+\S")
_ANY_LETTER = re.compile(r"[a-zA-Z]")


def strip_reasoning(text: str) -> str:
    """Drop ``<think>...</think>`` blocks (an unclosed one runs to the end) and any text before a
    stray ``</think>`` (chat templates that open the block in the prompt)."""
    if "</think>" in text.lower() and "<think>" not in text.lower():
        # positions from a regex on the text itself: lower() can lengthen it ("İ" -> "i̇")
        last_close = None
        for last_close in _THINK_CLOSE.finditer(text):
            pass
        text = text[last_close.end():] if last_close else text
    return _THINK_BLOCK.sub(" ", text)


def _letters_of(fragment: str) -> list[str]:
    """Letters named in a matched answer fragment ('"a", "c"', '(B) and (D)', 'A, C')."""
    tokens = re.findall(_TOKEN, fragment)
    letters = [next(g for g in groups if g).lower() for groups in tokens]
    if not letters:  # JSON-ish list content: quoted or bare single letters
        letters = [m.lower() for m in re.findall(r"(?<![A-Za-z])([a-zA-Z])(?![A-Za-z])", fragment)]
    return letters


def extract_answer(text: str, valid_letters: Sequence[str]) -> list[str] | None:
    """The set of option letters a model output commits to, sorted; ``None`` if it gives no answer.

    Recognised, the last one in the text winning over earlier drafts: a JSON list of letters
    (``["a", "c"]``), a JSON object's ``answer`` field, ``\\boxed{B}``, phrases such as "the answer is
    (B)" or "correct options are A and C", bold letters (``**B**``), and a bare reply ("B", "A, C",
    "b. oxygen"). Case is ignored. Letters outside ``valid_letters`` are not answers: they are
    dropped, and a candidate left with none is ignored. An explicit empty JSON list is an answer
    (the empty set), distinct from ``None``.
    """
    if not isinstance(text, str) or not text:
        return None
    valid = {letter.lower() for letter in valid_letters}
    body = strip_reasoning(text)
    candidates: list[tuple[int, int, list[str]]] = []  # (end position, priority, letters)

    def consider(end: int, priority: int, letters: Iterable[str], allow_empty: bool = False) -> None:
        raw = list(letters)
        kept = sorted({letter for letter in raw if letter in valid})
        if kept or (allow_empty and not raw):
            candidates.append((end, priority, kept))

    def consider_last(pattern: re.Pattern[str], priority: int, allow_empty: Callable[[str], bool]) -> None:
        # Only the last usable match of a pattern can win (its matches end at increasing
        # positions), so read letters from the end backwards: a 1 MB output with 90,000 JSON
        # lists costs one findall, not 90,000.
        for match in reversed(list(pattern.finditer(body))):
            inner = match.group(1) or ""
            found = len(candidates)
            consider(match.end(), priority, _letters_of(inner), allow_empty=allow_empty(inner))
            if len(candidates) > found:
                return

    consider_last(_ANSWER_FIELD, 5, lambda inner: inner.startswith("[") and not _ANY_LETTER.search(inner))
    consider_last(_JSON_LIST, 4, lambda inner: not inner.strip())
    consider_last(_BOXED, 3, lambda inner: False)
    consider_last(_PHRASE, 2, lambda inner: False)
    consider_last(_BOLD, 1, lambda inner: False)
    if not candidates:
        stripped = body.strip()
        whole = _WHOLE.match(stripped) if len(stripped) <= 40 else None
        if whole:
            consider(whole.end(), 0, _letters_of(whole.group(1)))
        else:
            leading = _LEADING.match(stripped)
            if leading:
                consider(leading.end(), 0, [leading.group(1).lower()])
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c[0], c[1]))[2]


def set_f1(predicted: Iterable[str], gold: Iterable[str]) -> float:
    """Per-item set F1: both empty -> 1.0, exactly one empty -> 0.0, else 2PR/(P+R)."""
    p, g = set(predicted), set(gold)
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    overlap = len(p & g)
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(p), overlap / len(g)
    return 2 * precision * recall / (precision + recall)


def score(predicted: list[str] | None, gold: Iterable[str]) -> dict[str, float]:
    """The per-item metrics: ``acc`` (exact set match), ``f1`` (set F1), ``unparseable`` (no answer)."""
    pred = predicted or []
    gold_set = set(gold)
    return {
        "acc": float(set(pred) == gold_set),
        "f1": set_f1(pred, gold_set),
        "unparseable": float(predicted is None),
    }


class ExtractAnswerFilter:
    """lm-eval filter: each response becomes the sorted list of letters it answers, or ``None``.

    Instantiated by lm-eval's FilterEnsemble (``function: !function medeval_metrics.emsqa.ExtractAnswerFilter``).
    """

    def __init__(self, **kwargs: Any) -> None:
        pass

    def apply(self, resps: Iterable[Sequence[str]], docs: Iterable[dict[str, Any]]) -> list[list[list[str] | None]]:
        return [[extract_answer(r, doc["letters"]) for r in responses] for responses, doc in zip(resps, docs)]


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """Generative variants: ``results[0]`` is the filtered answer (letters or ``None``)."""
    predicted = results[0]
    if isinstance(predicted, str):  # an unfiltered raw response (e.g. a user-added filter ensemble)
        predicted = extract_answer(predicted, doc["letters"])
    return score(predicted, doc["gold"])


def process_results_mc(doc: dict[str, Any], results: Sequence[tuple[float, bool]]) -> dict[str, float]:
    """Log-likelihood variant: the prediction is the single most likely option, scored as a set."""
    logliks = [ll for ll, _ in results]
    best = max(range(len(logliks)), key=lambda i: logliks[i])
    predicted = [doc["letters"][best]]
    metrics = score(predicted, doc["gold"])
    del metrics["unparseable"]
    return metrics
