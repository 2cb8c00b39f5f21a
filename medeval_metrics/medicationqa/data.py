"""MedicationQA data: the Hub mirror or the user's spreadsheet / JSON / CSV export, validated."""

from __future__ import annotations

import csv
import logging
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from medeval_metrics.data import (
    DataSource,
    MedevalDataError,
    file_kind,
    hub_offline,
    read_json_records,
    record_scored_files,
    refuse_wrong_file_kind,
)
from medeval_metrics.sources import hub_off_reason

log = logging.getLogger("medeval.medicationqa")

SOURCE = DataSource(
    key="medicationqa_path",
    description="the MedicationQA data set (MedInfo2019-QA-Medications.xlsx, 690 rows)",
    how_to_get=(
        "Download MedInfo2019-QA-Medications.xlsx from https://github.com/abachaa/Medication_QA_MedInfo2019 "
        "(or use the Hub mirror truehealth/medicationqa when online)."
    ),
    hub_repo="truehealth/medicationqa",
    sha256={"MedInfo2019-QA-Medications.xlsx": "4f13d0e3b195bd6a5d72a1872f9118cb5f69fd02c370001695330cfc9e3b5832"},
)
HUB_SPLIT = "train"
SHEET = "DrugQA"  # the data sheet's name in the original workbook (the reader finds it by its header)

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

SHOULD_BE = "the MedInfo2019-QA-Medications.xlsx workbook, or a .json/.jsonl/.csv export of it (UTF-8)"
# What exporting tools write for a missing value (pandas, Python's str(None), Excel's #N/A). The real
# spreadsheet's own markers "n/a" and "No answers" are part of the data set and are kept.
MISSING_VALUE_MARKERS = frozenset({"nan", "none", "null", "<na>", "#n/a"})


def _cell(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _map_columns(columns: Sequence[str], origin: str, place: Callable[[int], str]) -> dict[str, str | None]:
    """Input column for each field; an error for a field named by two columns (the second would
    silently replace the first) or a required field missing."""
    mapping: dict[str, str | None] = {}
    for field, names in COLUMNS.items():
        positions = [(index, name) for index, name in enumerate(columns) if name in names]
        if len(positions) > 1:
            listed = " and ".join(f"{name!r} ({place(index)})" for index, name in positions)
            raise MedevalDataError(
                f"{origin}: columns {listed} both hold the {names[0]!r} field, so it is ambiguous which "
                "to use. Keep one of them (rename or delete the other)."
            )
        mapping[field] = positions[0][1] if positions else None
    missing = [COLUMNS[f][0] for f in REQUIRED if mapping[f] is None]
    if missing:
        raise MedevalDataError(
            f"{origin}: column(s) {missing} not found (found {sorted(set(columns) - {''})}). The file needs the "
            f"spreadsheet's columns {[names[0] for names in COLUMNS.values()]} (or their snake_case names)."
        )
    return mapping


def normalise_rows(
    rows: Sequence[Mapping[str, Any]],
    origin: str,
    labels: Sequence[str] | None = None,
    columns: Sequence[str] | None = None,
    place: Callable[[int], str] | None = None,
) -> list[dict[str, str]]:
    """Rows with the six fields; an error naming the file, the row and the fix for anything unusable.

    ``labels``: where each row is, as the user's program shows it ("row 3" in a spreadsheet whose
    header is row 1, "line 3" of a CSV, "record 2" of JSON; default ``record <index>``);
    ``columns``: the header as written (duplicates kept; default: every key of every row);
    ``place``: how to name a column's position in messages.
    """
    if not rows:
        raise MedevalDataError(f"{origin}: no MedicationQA rows. {SOURCE.how_to_get}")
    if columns is None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
    labels = labels or [f"record {index}" for index in range(len(rows))]
    mapping = _map_columns(columns, origin, place or (lambda index: f"field {index + 1}"))
    out = []
    for label, row in zip(labels, rows):
        for field, column in mapping.items():
            if column and isinstance(row.get(column), (dict, list)):
                # str() of a JSON object or list would pass as a plausible question or reference answer.
                raise MedevalDataError(
                    f"{origin}: {label}: {column!r} is a JSON {type(row[column]).__name__}, not text. "
                    "Export each column as a plain string."
                )
        record = {field: _cell(row.get(column)) if column else "" for field, column in mapping.items()}
        for field in REQUIRED:
            if not record[field]:
                raise MedevalDataError(
                    f"{origin}: {label} has an empty {COLUMNS[field][0]!r}. Every row needs a question and a "
                    "reference answer; fix or remove that row."
                )
            if record[field].lower() in MISSING_VALUE_MARKERS:
                raise MedevalDataError(
                    f"{origin}: {label} has {record[field]!r} as its {COLUMNS[field][0]!r}: that is a missing-value "
                    "marker written by the exporting tool, not text. Fill it in or remove that row (and export "
                    "missing values as empty cells)."
                )
        out.append(record)
    return out


def _is_data_header(header: Sequence[str]) -> bool:
    return all(any(name in header for name in COLUMNS[field]) for field in REQUIRED)


def _read_xlsx(path: Path) -> list[dict[str, str]]:
    refuse_wrong_file_kind(
        path,
        "the MedicationQA workbook",
        {"xlsx", "zip", "binary", "empty"},
        SHOULD_BE,
        (".xlsx", ".json", ".jsonl", ".csv"),
    )
    try:
        import openpyxl
        from openpyxl.utils import get_column_letter
    except ImportError as exc:  # pragma: no cover - openpyxl is a dependency
        raise MedevalDataError(f"{path}: reading .xlsx needs openpyxl (pip install openpyxl).") from exc
    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as exc:  # zipfile.BadZipFile, KeyError, InvalidFileException...
        raise MedevalDataError(
            f"{path}: not a readable .xlsx workbook ({type(exc).__name__}). Download it again; it may be truncated."
        ) from exc
    try:
        # The data sheet is the one whose header row has the columns, wherever the sheet is.
        sheets = []
        for sheet in workbook.worksheets:
            numbered = [
                (n, r)
                for n, r in enumerate(sheet.iter_rows(min_row=1, values_only=True), start=1)
                if any(c not in (None, "") for c in r)
            ]
            # the header: the first row with the columns (title rows may sit above it), else the first row
            start = next((i for i, (_, r) in enumerate(numbered[:10]) if _is_data_header([_cell(c) for c in r])), 0)
            numbered = numbered[start:]
            header = [_cell(h) for h in numbered[0][1]] if numbered else []
            sheets.append((sheet.title, header, numbered))
    finally:
        workbook.close()
    data_sheets = [s for s in sheets if _is_data_header(s[1])]
    if not data_sheets and len([s for s in sheets if s[2]]) == 1:
        data_sheets = [s for s in sheets if s[2]]  # the only sheet with content: say which columns it lacks
    if not data_sheets:
        found = "; ".join(f"{title!r}: {[h for h in header if h][:8]}" for title, header, _ in sheets)
        raise MedevalDataError(
            f"{path}: no sheet has the MedicationQA columns 'Question' and 'Answer' in its header row (sheets: "
            f"{found}). The data sheet needs the spreadsheet's header row above its rows."
        )
    if len(data_sheets) > 1:
        raise MedevalDataError(
            f"{path}: sheets {' and '.join(repr(s[0]) for s in data_sheets)} both have the MedicationQA columns, so "
            "it is ambiguous which is the data set. Keep one data sheet (delete or rename the other's columns)."
        )
    title, header, numbered = data_sheets[0]
    origin = f"{path}, sheet {title!r}"
    rows = [dict(zip(header, cells)) for _, cells in numbered[1:]]
    if not rows:
        raise MedevalDataError(f"{origin}: no MedicationQA rows below the header. {SOURCE.how_to_get}")
    return normalise_rows(
        rows,
        origin,
        [f"row {n}" for n, _ in numbered[1:]],
        header,
        lambda index: f"column {get_column_letter(index + 1)}",
    )


def _read_csv(path: Path) -> list[dict[str, str]]:
    refuse_wrong_file_kind(
        path, "the MedicationQA CSV export", {"csv", "text", "empty"}, SHOULD_BE, (".xlsx", ".json", ".jsonl", ".csv")
    )
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.reader(handle)
            header: list[str] | None = None
            rows, labels = [], []
            first_line = 1
            for cells in reader:
                if any(c.strip() for c in cells):
                    if header is None:
                        header = [c.strip() for c in cells]
                    else:
                        if any(c.strip() for c in cells[len(header) :]):
                            raise MedevalDataError(
                                f"{path}: line {first_line} has {len(cells)} cells but the header has {len(header)}: "
                                "a comma inside an unquoted cell would cut the text short. Quote cells that hold "
                                "commas (re-export the CSV from the spreadsheet)."
                            )
                        rows.append(dict(zip(header, cells)))
                        labels.append(f"line {first_line}")  # where the row starts (quoted cells may span lines)
                first_line = reader.line_num + 1
    except UnicodeDecodeError as exc:
        raise MedevalDataError(f"{path}: not UTF-8 text (byte {exc.start}). Re-save the CSV as UTF-8.") from exc
    except csv.Error as exc:
        raise MedevalDataError(f"{path}: not readable as CSV ({exc}). Re-export it from the spreadsheet.") from exc
    if not rows:
        raise MedevalDataError(f"{path}: no MedicationQA rows. {SOURCE.how_to_get}")
    return normalise_rows(rows, str(path), labels, header, lambda index: f"column {index + 1}")


def read_local(path: Path) -> list[dict[str, str]]:
    path = Path(path)
    if path.is_dir():
        refuse_wrong_file_kind(path, "the MedicationQA data set", (), SHOULD_BE, (".xlsx", ".json", ".jsonl", ".csv"))
    suffix = path.suffix.lower()
    if suffix in (".xlsx", ".xlsm"):
        return _read_xlsx(path)
    if suffix == ".csv":
        return _read_csv(path)
    if suffix in (".json", ".jsonl"):
        rows = read_json_records(path, "the MedicationQA export", record_fields=COLUMNS["question"])
        return normalise_rows(rows, str(path))
    kind = file_kind(path)
    if kind in ("xlsx", "encrypted-office", "ole-office", "parquet", "folder"):
        refuse_wrong_file_kind(path, "the MedicationQA data set", (), SHOULD_BE)
    raise MedevalDataError(f"{path}: unsupported file type {suffix!r}; use the .xlsx, or a .json/.jsonl/.csv export.")


def _read_hub() -> list[dict[str, str]]:
    if hub_offline():
        raise SOURCE.missing(f"{hub_off_reason()} and no local copy is set")
    try:
        import datasets

        rows = list(datasets.load_dataset(SOURCE.hub_repo, split=HUB_SPLIT))
    except Exception as exc:  # network, auth, missing repo: all mean "get it yourself"
        raise SOURCE.missing(f"loading the Hub dataset {SOURCE.hub_repo} failed ({type(exc).__name__})") from exc
    return normalise_rows(rows, f"Hub dataset {SOURCE.hub_repo}")


def load_rows(metadata: dict[str, Any] | None = None) -> list[dict[str, str]]:
    path = SOURCE.local_path(metadata)
    if path is None:
        return _read_hub()
    rows = read_local(path)
    record_scored_files(SOURCE.description, [path], len(rows))
    return rows


def load_medicationqa(**metadata: Any):
    """lm-eval ``custom_dataset``: all rows as the ``test`` split (a ``datasets.DatasetDict``)."""
    import datasets

    from medeval_metrics.judge.config import PANEL_FIELD, panel_for_task, register_panel

    panel = panel_for_task(metadata)  # a bad judges config fails here, before any generation
    rows = load_rows(metadata)
    if panel is not None:  # filters get no metadata: the documents name the panel this process keeps, by key
        key = register_panel(panel)
        rows = [{**row, PANEL_FIELD: key} for row in rows]
    from medeval_metrics.medicationqa import bertscore

    bertscore_model = bertscore.model_from_metadata(metadata)  # opt-in; process_results reads it per doc
    if bertscore_model:
        value = bertscore.doc_value(bertscore_model)  # a Hub name, or a key for a local folder
        rows = [{**row, bertscore.DOC_FIELD: value} for row in rows]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(rows)})
