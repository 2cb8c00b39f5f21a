"""Records from a JSON array, a JSON object holding one array, or JSON Lines, without losing a key or a record."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from medeval_metrics.checksums import check_known_checksum
from medeval_metrics.errors import MedevalDataError
from medeval_metrics.files import refuse_wrong_file_kind

JSON_RECORDS_SHOULD_BE = (
    "a JSON array of records, a JSON object holding one such array, or JSON Lines (one object per line), in UTF-8"
)


class _DuplicateKeysDict(dict):
    """A parsed object that had a key twice (``json`` keeps the last value silently)."""

    duplicate: str = ""


def _object_without_losing_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    record = dict(pairs)
    if len(record) == len(pairs):
        return record
    seen: set[str] = set()
    marked = _DuplicateKeysDict(record)
    marked.duplicate = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
    return marked


def _loads(text: str) -> Any:
    return json.loads(text, object_pairs_hook=_object_without_losing_keys)


def too_deep(path: Path, description: str, where: str = "") -> MedevalDataError:
    return MedevalDataError(
        f"{path}: {description}{where} nests arrays/objects too deeply to parse (thousands of levels). A file of "
        "records is a flat list of objects; point the pack at the right file."
    )


def _duplicate_key_error(path: Path, description: str, where: str, key: str) -> MedevalDataError:
    return MedevalDataError(
        f"{path}: {where} of {description} has the key {key!r} twice; JSON readers keep only the last value, so "
        "the other would be lost silently. Rename or remove one of them."
    )


def read_json_records(path: Path, description: str, record_fields: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Records from a JSON array, a JSON object holding one array, or JSON Lines (UTF-8, BOM or not).

    The format is found by parsing, not by layout: the whole text is parsed as one JSON document
    first, and as JSON Lines only when that fails. A lone JSON object is one record (a one-line
    JSON Lines file, or one pretty-printed record) when it has one of ``record_fields``; otherwise it
    must hold exactly one list, the records. A workbook, CSV, folder or archive is refused with a
    message saying what it is (``refuse_wrong_file_kind``); a key present twice in a record, and
    nesting deep enough to exhaust the parser, are errors naming the record.
    """
    path = Path(path)
    refuse_wrong_file_kind(path, description, {"json", "text"}, JSON_RECORDS_SHOULD_BE, (".json", ".jsonl"))
    check_known_checksum(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise MedevalDataError(
            f"{path}: {description} is not UTF-8 text (byte {exc.start}). Re-save the file as UTF-8."
        ) from exc
    except OSError as exc:
        raise MedevalDataError(f"{path}: cannot read {description} ({exc.strerror}).") from exc
    if not text.strip():
        raise MedevalDataError(f"{path}: {description} is empty. Point the pack at the full file.")
    try:
        document = _loads(text)
    except RecursionError:
        raise too_deep(path, description) from None
    except json.JSONDecodeError as document_error:
        records, where = _json_lines(path, description, text, document_error)
    else:
        records, where = _records_of_document(path, description, document, set(record_fields))
    if not records:
        raise MedevalDataError(f"{path}: {description} holds no records.")
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise MedevalDataError(
                f"{path}: {where(index)} of {description} is a {type(record).__name__}, not a JSON object."
            )
        if isinstance(record, _DuplicateKeysDict):
            raise _duplicate_key_error(path, description, where(index), record.duplicate)
    return records


def _records_of_document(path: Path, description: str, document: Any, record_fields: set[str]):
    def where(index: int) -> str:
        return f"record {index}"

    if isinstance(document, list):
        return document, where
    if not isinstance(document, dict):
        raise MedevalDataError(
            f"{path}: {description} is a single JSON {type(document).__name__}; expected {JSON_RECORDS_SHOULD_BE}."
        )
    if record_fields & document.keys():
        return [document], where  # one record: a one-line JSON Lines file, or one pretty-printed object
    if isinstance(document, _DuplicateKeysDict):
        raise _duplicate_key_error(path, description, "the top-level object", document.duplicate)
    lists = [value for value in document.values() if isinstance(value, list)]
    if len(lists) != 1:
        expected = f" (a single record needs a {sorted(record_fields)[0]!r} field)" if record_fields else ""
        raise MedevalDataError(
            f"{path}: {description} is a JSON object with {len(lists)} lists; expected a list of records "
            f"(or an object holding exactly one list){expected}."
        )
    return lists[0], where


def _json_lines(path: Path, description: str, text: str, document_error: json.JSONDecodeError):
    """Parse ``text`` as JSON Lines; if its first line is not JSON either, report ``document_error``."""
    records: list[Any] = []
    line_numbers: list[int] = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(_loads(line))
        except RecursionError:
            raise too_deep(path, description, f" (line {line_number})") from None
        except json.JSONDecodeError as exc:
            if not records:  # not JSON Lines either: the document's own error is the useful one
                raise _document_error(path, description, document_error) from document_error
            raise MedevalDataError(
                f"{path}: line {line_number} of {description} (JSON Lines) is not valid JSON ({exc.msg}). "
                "Fix or remove that line (a truncated download ends mid-line: download it again)."
            ) from exc
        line_numbers.append(line_number)
    if records and isinstance(records[0], list) and document_error.msg == "Extra data":
        # JSON arrays one after another (a file concatenated with itself), not one object per line
        raise _document_error(path, description, document_error) from document_error

    def where(index: int) -> str:
        return f"line {line_numbers[index]} (record {index})"

    return records, where


def _document_error(path: Path, description: str, exc: json.JSONDecodeError) -> MedevalDataError:
    if exc.msg == "Extra data":
        return MedevalDataError(
            f"{path}: {description} holds more than one JSON document: after the first, more follows from line "
            f"{exc.lineno}, column {exc.colno}. Was it concatenated or appended to? Keep one copy of the data."
        )
    return MedevalDataError(
        f"{path}: {description} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}). "
        "The file may be truncated; download it again."
    )
