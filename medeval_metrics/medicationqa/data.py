"""MedicationQA data: the Hub mirror or the user's spreadsheet / JSON / CSV export, validated."""

from __future__ import annotations

import csv
import logging
from pathlib import Path
from typing import Any

from medeval_metrics.data import DataSource, MedevalDataError, hub_offline, read_json_records

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

    from medeval_metrics.judge.config import PANEL_FIELD, panel_for_task

    panel = panel_for_task(metadata)  # a bad judges config fails here, before any generation
    rows = load_rows(metadata)
    if panel is not None:  # handed to the judge filter with the documents (filters get no metadata)
        rows = [{**row, PANEL_FIELD: panel.to_json()} for row in rows]
    from medeval_metrics.medicationqa import bertscore

    bertscore_model = bertscore.model_from_metadata(metadata)  # opt-in; process_results reads it per doc
    if bertscore_model:
        rows = [{**row, bertscore.DOC_FIELD: bertscore_model} for row in rows]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})


