"""MedicationQA (Ben Abacha et al., MedInfo 2019): consumer medication questions, judged by a panel.

Data: the 690 rows of ``MedInfo2019-QA-Medications.xlsx`` (all of them are the test set), from the
Hub mirror ``truehealth/medicationqa`` (split ``train``) or the user's local copy: the original
spreadsheet, or a JSON / JSON Lines / CSV export with the same columns (spreadsheet headers or
snake_case). Point at a local copy with ``--metadata '{"medicationqa_path": ...}'`` or
``MEDEVAL_MEDICATIONQA_PATH``.

Scores: ROUGE-L and sentence BLEU against the reference answer, always; the judge panel's
accuracy / completeness / clarity (1-5), HELM panel score, MedARC reward, unscored rate, per-judge
success rate and agreement when a panel is configured (``medeval_metrics.judge``).
"""

from __future__ import annotations

import csv
import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

from medeval_metrics.data import DataSource, MedevalDataError, hub_offline, read_json_records
from medeval_metrics.judge.aggregate import item_metrics
from medeval_metrics.judge.rubric import Rubric

log = logging.getLogger("medeval.medicationqa")

SOURCE = DataSource(
    key="medicationqa_path",
    description="the MedicationQA data set (MedInfo2019-QA-Medications.xlsx, 690 rows)",
    how_to_get=(
        "Download MedInfo2019-QA-Medications.xlsx from https://github.com/abachaa/Medication_QA_MedInfo2019 "
        "(or use the Hub mirror truehealth/medicationqa when online)."
    ),
    hub_repo="truehealth/medicationqa",
)
HUB_SPLIT = "train"
SHEET = "DrugQA"

# output field -> accepted input column names (spreadsheet header first)
COLUMNS: dict[str, tuple[str, ...]] = {
    "question": ("Question", "question"),
    "focus_drug": ("Focus (Drug)", "focus_drug", "focus", "Focus"),
    "question_type": ("Question Type", "question_type", "type"),
    "answer": ("Answer", "answer"),
    "section_title": ("Section Title", "section_title"),
    "url": ("URL", "url", "Url"),
}
REQUIRED = ("question", "answer")

RUBRIC = Rubric(
    name="medicationqa",
    version="medicationqa-rubric-v1",
    task_instruction=(
        "You are a clinical pharmacist grading an answer to a consumer's question about a medication. "
        "Compare the answer with the reference answer written by experts; the reference is the standard "
        "for correct information, though a correct answer may be worded differently or add correct detail."
    ),
    dimensions={
        "accuracy": "is the medication information correct and consistent with the reference (1: wrong or unsafe, 5: fully correct)",
        "completeness": "does it answer every part of the question that the reference covers (1: misses the point, 5: complete)",
        "clarity": "is it clear and understandable for a lay person (1: confusing, 5: very clear)",
    },
)

INSTRUCTION = (
    "Answer the following question about a medication for a patient or caregiver. Be accurate, "
    "complete and easy to understand."
)


def _cell(value: Any) -> str:
    return "" if value is None else str(value).strip()


def normalise_rows(rows: list[dict[str, Any]], origin: str) -> list[dict[str, str]]:
    """Rows with the six fields; an error naming the file, the row and the fix for anything unusable."""
    if not rows:
        raise MedevalDataError(f"{origin}: no MedicationQA rows. {SOURCE.how_to_get}")
    headers = set(rows[0])
    mapping: dict[str, str | None] = {}
    for field, names in COLUMNS.items():
        mapping[field] = next((n for n in names if n in headers), None)
    missing = [COLUMNS[f][0] for f in REQUIRED if mapping[f] is None]
    if missing:
        raise MedevalDataError(
            f"{origin}: column(s) {missing} not found (found {sorted(headers)}). The file needs the spreadsheet's "
            f"columns {[names[0] for names in COLUMNS.values()]} (or their snake_case names)."
        )
    out = []
    for number, row in enumerate(rows, start=1):
        for field, column in mapping.items():
            if column and isinstance(row.get(column), (dict, list)):
                # str() of a JSON object or list would pass as a plausible question or reference answer.
                raise MedevalDataError(
                    f"{origin}: row {number}: {column!r} is a JSON {type(row[column]).__name__}, not text. "
                    "Export each column as a plain string."
                )
        record = {field: _cell(row.get(column)) if column else "" for field, column in mapping.items()}
        for field in REQUIRED:
            if not record[field]:
                raise MedevalDataError(
                    f"{origin}: row {number} has an empty {COLUMNS[field][0]!r}. Every row needs a question and a "
                    "reference answer; fix or remove that row."
                )
        out.append(record)
    return out


def _read_xlsx(path: Path) -> list[dict[str, Any]]:
    try:
        import openpyxl
    except ImportError as exc:  # pragma: no cover - openpyxl is a dependency
        raise MedevalDataError(f"{path}: reading .xlsx needs openpyxl (pip install openpyxl).") from exc
    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # zipfile.BadZipFile, KeyError, InvalidFileException...
        raise MedevalDataError(
            f"{path}: not a readable .xlsx workbook ({type(exc).__name__}). Download it again; it may be truncated."
        ) from exc
    sheet = workbook[SHEET] if SHEET in workbook.sheetnames else workbook.worksheets[0]
    rows = list(sheet.iter_rows(values_only=True))
    workbook.close()
    if not rows:
        raise MedevalDataError(f"{path}: sheet {sheet.title!r} is empty.")
    header = [_cell(h) for h in rows[0]]
    return [dict(zip(header, r)) for r in rows[1:] if any(c not in (None, "") for c in r)]


def _read_csv(path: Path) -> list[dict[str, Any]]:
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            return list(csv.DictReader(handle))
    except UnicodeDecodeError as exc:
        raise MedevalDataError(f"{path}: not UTF-8 text (byte {exc.start}). Re-save the CSV as UTF-8.") from exc


def read_local(path: Path) -> list[dict[str, str]]:
    suffix = path.suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        rows = _read_xlsx(path)
    elif suffix == ".csv":
        rows = _read_csv(path)
    elif suffix in (".json", ".jsonl"):
        rows = read_json_records(path, "the MedicationQA export")
    else:
        raise MedevalDataError(f"{path}: unsupported file type {suffix!r}; use the .xlsx, or a .json/.jsonl/.csv export.")
    return normalise_rows(rows, str(path))


def _read_hub() -> list[dict[str, str]]:
    if hub_offline():
        raise SOURCE.missing("the Hub is disabled (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE) and no local copy is set")
    try:
        import datasets

        rows = list(datasets.load_dataset(SOURCE.hub_repo, split=HUB_SPLIT))
    except Exception as exc:  # network, auth, missing repo: all mean "get it yourself"
        raise SOURCE.missing(f"loading the Hub dataset {SOURCE.hub_repo} failed ({type(exc).__name__})") from exc
    return normalise_rows(rows, f"Hub dataset {SOURCE.hub_repo}")


def load_rows(metadata: dict[str, Any] | None = None) -> list[dict[str, str]]:
    path = SOURCE.local_path(metadata)
    return read_local(path) if path is not None else _read_hub()


def load_medicationqa(**metadata: Any):
    """lm-eval ``custom_dataset``: all rows as the ``test`` split (a ``datasets.DatasetDict``)."""
    import datasets

    from medeval_metrics.judge.config import configure_from_metadata

    configure_from_metadata(metadata)  # a bad judges config fails here, before any generation
    rows = load_rows(metadata)
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


def doc_to_text(doc: dict[str, Any]) -> str:
    return f"{INSTRUCTION}\n\nQuestion: {doc['question']}\nAnswer:"


@lru_cache(maxsize=1)
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure (rouge-score, Porter stemming), 0-1."""
    if not prediction.strip() or not reference.strip():
        return 0.0
    return float(_rouge_scorer().score(reference, prediction)["rougeL"].fmeasure)


def bleu(prediction: str, reference: str) -> float:
    """Sentence BLEU (sacrebleu defaults: 13a tokenisation, exponential smoothing), 0-100."""
    import sacrebleu

    if not prediction.strip():
        return 0.0
    return float(sacrebleu.sentence_bleu(prediction, [reference]).score)


def process_results(doc: dict[str, Any], results: list[Any]) -> dict[str, Any]:
    record = results[0]
    if not isinstance(record, dict):  # a filter other than the judge filter: plain text
        record = {"answer": str(record), "verdicts": None, "judges": None}
    answer = str(record.get("answer") or "").strip()
    out: dict[str, Any] = {
        "rougeL": rouge_l(answer, doc["answer"]),
        "bleu": bleu(answer, doc["answer"]),
        "judge_computed": 0.0 if record.get("verdicts") is None else 1.0,
    }
    if record.get("verdicts") is not None:
        out.update(item_metrics(record["verdicts"], list(RUBRIC.dimensions), record["judges"], RUBRIC.scale_max))
    return out


def _install_hooks() -> None:
    """Give the agreement aggregation a real stderr in lm-eval's table (see judge.aggregate)."""
    try:
        from medeval_metrics.stats import install_stderr_hook

        install_stderr_hook()
    except ImportError:  # lm-eval absent: only the loader/metrics are being used
        pass


_install_hooks()
