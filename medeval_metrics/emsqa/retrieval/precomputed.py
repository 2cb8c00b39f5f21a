"""Precomputed retrievals: which chunks (ids and scores) each item got, written by one run and read by
another so a score is reproduced exactly without the retriever.

File format (JSON Lines): a header line ``{"medeval_retrievals": 1, "chunks_version": ...,
"settings": {...}}`` then one line per item ``{"id": ..., "chunks": [{"id", "source", "score"}, ...]}``.
An lm-eval sample log (``samples_<task>_*.jsonl``) of a retrieval task is accepted too: each line's
``doc`` carries the same fields.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from medeval_metrics.data import MedevalDataError
from medeval_metrics.json_records import too_deep

FORMAT = 1


def write_retrievals(path: Path, header: Mapping[str, Any], items: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]) -> Path:
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    from medeval_metrics.safe_files import atomic_open

    with atomic_open(path) as handle:  # a reader never sees half a file
        handle.write(json.dumps({"medeval_retrievals": FORMAT, **header}, sort_keys=True) + "\n")
        for item_id, chunks in items:
            handle.write(json.dumps({"id": item_id, "chunks": list(chunks)}) + "\n")
    return path


def checked_text(path: Path, description: str) -> str:
    """The file's text, or one error naming the file when it is not UTF-8 (as the data files' reader says it)."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise MedevalDataError(f"{path}: {description} is not UTF-8 text (byte {exc.start}, line {line}). Re-save "
                               "the file as UTF-8.") from exc
    except OSError as exc:
        raise MedevalDataError(f"{path}: cannot read {description} ({exc.strerror}).") from exc


def checked_loads(text: str, path: Path, description: str, where: str = "") -> Any:
    """``json.loads`` whose too-deep nesting is the data files' clear error, not a RecursionError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise too_deep(path, description, where) from None


def _is_id(value: Any) -> bool:
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _is_score(value: Any) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def read_retrievals(path: Path, chunks_version_now: str) -> dict[str, list[dict[str, Any]]]:
    """item id -> its chunks, from our file or an lm-eval sample log; errors name the file and line."""
    path = Path(path).expanduser()
    fix = ("Give the file a previous run wrote (rag_save_retrievals) or its samples_*.jsonl "
           "(run with --log_samples).")
    if not path.is_file():
        raise MedevalDataError(f"rag_retrievals points at {path}, which is not a file. {fix}")
    out: dict[str, list[dict[str, Any]]] = {}
    versions: set[str] = set()
    description = "the rag_retrievals file"
    # one line per record: every error names the line
    for line_number, line in enumerate(checked_text(path, description).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = checked_loads(line, path, description, f" (line {line_number})")
        except json.JSONDecodeError as exc:
            raise MedevalDataError(f"{path}: line {line_number} is not valid JSON ({exc.msg}). {fix}") from exc
        if not isinstance(record, dict):
            raise MedevalDataError(f"{path}: line {line_number} is not a JSON object. {fix}")
        if "medeval_retrievals" in record:
            versions.add(str(record.get("chunks_version")))
            continue
        entry = record.get("doc", record)
        if not isinstance(entry, dict):
            raise MedevalDataError(f"{path}: line {line_number}: its 'doc' is a {type(entry).__name__}, not an "
                                   f"object. {fix}")
        item_id, chunks = entry.get("id"), entry.get("rag_chunks", entry.get("chunks"))
        if item_id is not None and not _is_id(item_id):
            raise MedevalDataError(f"{path}: line {line_number}: the item id is a {type(item_id).__name__}; "
                                   f"expected a string or a number. {fix}")
        if item_id is None or not isinstance(chunks, list):
            raise MedevalDataError(
                f"{path}: line {line_number} has no item id and chunk list (fields 'id' and 'chunks', or a "
                f"sample's doc with 'id' and 'rag_chunks'). {fix}"
            )
        if "doc" in record and entry.get("rag_chunks_version"):
            versions.add(str(entry["rag_chunks_version"]))
        for number, chunk in enumerate(chunks):
            if not isinstance(chunk, dict) or "id" not in chunk or "score" not in chunk:
                raise MedevalDataError(f"{path}: line {line_number}: each chunk needs 'id' and 'score'. {fix}")
            if not _is_id(chunk["id"]) or not _is_score(chunk["score"]):
                raise MedevalDataError(
                    f"{path}: line {line_number}, chunk {number}: 'id' must be a string and 'score' a number "
                    f"(got {type(chunk['id']).__name__} and {type(chunk['score']).__name__}). {fix}")
        out[str(item_id)] = chunks
    if not out:
        raise MedevalDataError(f"{path}: no retrievals in this file. {fix}")
    stale = versions - {chunks_version_now}
    if stale:
        raise MedevalDataError(
            f"{path}: these retrievals were made on another corpus or chunking (chunks version {sorted(stale)[0]}, "
            f"now {chunks_version_now}). Use the same knowledge files and rag_chunk_* settings as the run that "
            "wrote it, or retrieve again without rag_retrievals."
        )
    return out
