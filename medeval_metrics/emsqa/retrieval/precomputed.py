"""Precomputed retrievals: which chunks (ids and scores) each item got, written by one run and read by
another so a score is reproduced exactly without the retriever.

File format (JSON Lines), one section per task: a header line ``{"medeval_retrievals": 2, "task": ...,
"mode", "k", "areas", "retriever", "knowledge", "chunking", ...}`` then that task's items
``{"task": ..., "id": ..., "chunks": [{"id", "source", "score"}, ...]}``. Saving one task's section
keeps the other tasks' sections of the file, so the tasks of one run share one file. An lm-eval
sample log (``samples_<task>_*.jsonl``) of a retrieval task is accepted too: each line's ``doc``
carries the chunks and the same header (``rag_header``).

A section is used only when its header says it was made the way the task retrieves now
(:data:`HEADER_FIELDS`); otherwise :func:`header_difference` names the first field that differs.

A file made by another retriever (an *external* section) has the header ``{"medeval_retrievals": 2,
"retriever": {"external": "<name>", ...}, "knowledge": ..., "chunking": ...}`` (:data:`EXTERNAL_FIELDS`;
``task`` optional): its chunk ids are checked against the knowledge base and chunking it names, which must
be the run's (:func:`section_difference`); scores are optional, and a chunk's ``title``, ``text`` and
``source``, when given, must be the chunk's. Its documents are shown in the order given.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.json_records import too_deep

FORMAT = 2
# What decides the documents a prompt shows, in the order a refusal names them.
HEADER_FIELDS = ("mode", "k", "areas", "retriever", "knowledge", "chunking")
_FIX = (
    "Give the file a previous run wrote (rag_save_retrievals) or its samples_*.jsonl (run with --log_samples), or "
    'one of your own retriever\'s, whose header says "retriever": {"external": "<name>"} (tasks/emsqa/README.md).'
)
# An external section's header: what a user writes (tasks/emsqa/README.md, "Your own retriever").
EXTERNAL_FIELDS = ("medeval_retrievals", "retriever", "knowledge", "chunking", "task")
EXTERNAL_COMPARED = ("knowledge", "chunking")  # what the run must share with the file (mode, k, areas: the user's)
_EXTERNAL_FIX = (
    'A file of another retriever starts with {"medeval_retrievals": 2, "retriever": {"external": "<name>"}, '
    '"knowledge": ..., "chunking": ...} (the header the pack prints; tasks/emsqa/README.md, "Your own retriever"), '
    'then one line per item: {"id": "<item id>", "chunks": [{"id": "<chunk id>"}, ...]}.'
)
_CHUNK_TEXT_FIELDS = ("title", "text", "source")  # optional in a chunk entry; when given, the chunk's own


@dataclass
class Section:
    """One task's retrievals: its header (None for a file that records none) and item id -> chunks."""

    task: str | None
    header: dict[str, Any] | None
    items: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _write(path: Path, sections: Sequence[Section]) -> None:
    from medeval_metrics.safe_files import atomic_open

    with atomic_open(path) as handle:  # a reader never sees half a file
        for section in sections:
            handle.write(json.dumps({"medeval_retrievals": FORMAT, **(section.header or {})}, sort_keys=True) + "\n")
            for item_id, chunks in section.items.items():
                line = {"id": item_id, "chunks": list(chunks)}
                if section.task is not None:
                    line = {"task": section.task, **line}
                handle.write(json.dumps(line) + "\n")


def write_retrievals(
    path: Path, header: Mapping[str, Any], items: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]
) -> Path:
    """A file of one section."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, [Section(header.get("task"), dict(header), {i: list(c) for i, c in items})])
    return path


def save_task_retrievals(
    path: Path, header: Mapping[str, Any], items: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]
) -> Path:
    """Write ``header["task"]``'s section into ``path``, keeping the sections of the other tasks there. A
    section the task saved before with the same header keeps its items (a ``--limit`` run adds, it does not
    cut a full run's section); a file there that holds no retrievals is refused, not overwritten."""
    from medeval_metrics.emsqa.retrieval.cache import exclusive_lock

    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    task = str(header["task"])
    with exclusive_lock(path.with_name(f".{path.name}.lock")):
        sections = check_save_target(path)
        kept = [s for s in sections if s.task is not None and s.task != task]
        earlier = next((s for s in sections if s.task == task and section_difference(s.header, header) is None), None)
        merged = dict(earlier.items) if earlier is not None else {}
        merged.update({i: list(c) for i, c in items})
        _write(path, [*kept, Section(task, dict(header), merged)])
    return path


def check_save_target(path: Path) -> list[Section]:
    """The sections already in ``rag_save_retrievals``'s file (none when there is no file); an error naming
    the file when it is something else (a data set, say), which saving would overwrite."""
    path = Path(path).expanduser()
    if not path.is_file():
        return []
    try:
        sections = read_sections(path)
    except MedevalDataError as exc:
        reason = str(exc).removeprefix(f"{path}: ").split(". ")[0]
        raise MedevalDataError(
            f"rag_save_retrievals: {path} is not a retrievals file ({reason}), and saving would overwrite it. "
            "Name a new file (or one a previous run saved)."
        ) from None
    if any(s.task is None for s in sections):
        raise MedevalDataError(
            f"rag_save_retrievals: {path} holds retrievals it did not save (an lm-eval sample log, or a file of "
            "an older version), and saving would overwrite it. Name a new file; give this one as rag_retrievals."
        )
    return sections


def checked_text(path: Path, description: str) -> str:
    """The file's text, or one error naming the file when it is not UTF-8 (as the data files' reader says it)."""
    try:
        return path.read_bytes().decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise MedevalDataError(
            f"{path}: {description} is not UTF-8 text (byte {exc.start}, line {line}). Re-save the file as UTF-8."
        ) from exc
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
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def external_name(header: Mapping[str, Any] | None) -> str | None:
    """The retriever an external section's header names (``"retriever": {"external": name}``), else None."""
    retriever = (header or {}).get("retriever")
    if isinstance(retriever, dict) and isinstance(retriever.get("external"), str):
        return retriever["external"]
    return None


def _is_external(header: Mapping[str, Any] | None) -> bool:
    retriever = (header or {}).get("retriever")
    return isinstance(retriever, dict) and "external" in retriever


def check_external_header(record: Mapping[str, Any], path: Path, line_number: int) -> None:
    """An external section's header line as documented, else one error naming the file, the line and the fix."""
    where = f"{path}: line {line_number} (an external retriever's header)"
    problem = None
    name = record["retriever"].get("external")
    unknown = sorted(str(k) for k in record if k not in EXTERNAL_FIELDS)
    if record.get("medeval_retrievals") != FORMAT:
        problem = f"'medeval_retrievals' is {_shown(record.get('medeval_retrievals'))}; this version reads {FORMAT}"
    elif unknown:
        problem = (
            f"it has the field(s) {', '.join(unknown)}, which an external file does not take (its fields: "
            f"{', '.join(EXTERNAL_FIELDS[1:])}); details of your retriever go inside 'retriever'"
        )
    elif not isinstance(name, str) or not name.strip():
        problem = f'\'retriever\' must name your retriever as text, {{"external": "<name>"}}, not {_shown(name)}'
    elif not isinstance(record.get("knowledge"), str) or not re.fullmatch(r"[0-9a-f]{64}", record["knowledge"]):
        problem = "'knowledge' must be the knowledge base's digest the pack prints (64 hex digits)"
    elif not isinstance(record.get("chunking"), dict):
        problem = "'chunking' must be the object the pack prints (tokens, overlap, tokenizer, text)"
    elif "task" in record and not isinstance(record["task"], str):
        problem = "'task', when given, must be the name of the task the section is for"
    if problem:
        raise MedevalDataError(f"{where}: {problem}. {_EXTERNAL_FIX}")


def _check_chunks(chunks: list[Any], external: bool, path: Path, line_number: int, item_id: Any) -> None:
    fix = _EXTERNAL_FIX if external else _FIX
    seen: set[str] = set()
    for number, chunk in enumerate(chunks):
        where = f"{path}: line {line_number}, chunk {number}"
        if external:  # a score is the retriever's own and optional: the documents are shown in the order given
            if not isinstance(chunk, dict) or not _is_id(chunk.get("id")):
                raise MedevalDataError(f"{where}: each chunk is an object with the chunk's 'id' (text). {fix}")
            score = chunk.get("score")
            if score is not None and not _is_score(score):
                raise MedevalDataError(f"{where}: 'score', when given, must be a number (got {_shown(score)}). {fix}")
            for name in _CHUNK_TEXT_FIELDS:
                if name in chunk and not isinstance(chunk[name], str):
                    raise MedevalDataError(f"{where}: '{name}', when given, must be text. {fix}")
        else:
            if not isinstance(chunk, dict) or "id" not in chunk or "score" not in chunk:
                raise MedevalDataError(f"{path}: line {line_number}: each chunk needs 'id' and 'score'. {fix}")
            if not _is_id(chunk["id"]) or not _is_score(chunk["score"]):
                raise MedevalDataError(
                    f"{where}: 'id' must be a string and 'score' a number "
                    f"(got {type(chunk['id']).__name__} and {type(chunk['score']).__name__}). {fix}"
                )
        if str(chunk["id"]) in seen:  # a retriever returns a chunk once: a repeat is a merge gone wrong
            raise MedevalDataError(
                f"{where}: chunk {str(chunk['id'])!r} is listed twice for item {str(item_id)!r}. "
                "List each chunk once per item."
            )
        seen.add(str(chunk["id"]))


def read_sections(path: Path) -> list[Section]:
    """The sections of a retrievals file or an lm-eval sample log; errors name the file and line."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise MedevalDataError(f"rag_retrievals points at {path}, which is not a file. {_FIX}")
    sections: dict[Any, Section] = {}
    current: Section | None = None
    first_line: dict[tuple[int, str], int] = {}  # (section, item id) -> the line that gave it
    description = "the rag_retrievals file"
    # one line per record: every error names the line
    for line_number, line in enumerate(checked_text(path, description).splitlines(), start=1):
        if not line.strip():
            continue
        # the layout to follow: an external retriever's when the line follows such a header
        fix = _EXTERNAL_FIX if current is not None and _is_external(current.header) else _FIX
        try:
            record = checked_loads(line, path, description, f" (line {line_number})")
        except json.JSONDecodeError as exc:
            raise MedevalDataError(f"{path}: line {line_number} is not valid JSON ({exc.msg}). {fix}") from exc
        if not isinstance(record, dict):
            raise MedevalDataError(f"{path}: line {line_number} is not a JSON object. {fix}")
        if "medeval_retrievals" in record:
            if _is_external(record):
                check_external_header(record, path, line_number)
            header = {k: v for k, v in record.items() if k != "medeval_retrievals"}
            task = header.get("task")
            current = sections.setdefault(("file", task), Section(task, header))
            current.header = header
            continue
        entry = record.get("doc", record)
        if not isinstance(entry, dict):
            raise MedevalDataError(
                f"{path}: line {line_number}: its 'doc' is a {type(entry).__name__}, not an object. {fix}"
            )
        item_id, chunks = entry.get("id"), entry.get("rag_chunks", entry.get("chunks"))
        if item_id is not None and not _is_id(item_id):
            raise MedevalDataError(
                f"{path}: line {line_number}: the item id is a {type(item_id).__name__}; "
                f"expected a string or a number. {fix}"
            )
        if item_id is None or not isinstance(chunks, list):
            raise MedevalDataError(
                f"{path}: line {line_number} has no item id and chunk list (fields 'id' and 'chunks', or a "
                f"sample's doc with 'id' and 'rag_chunks'). {fix}"
            )
        if "doc" in record:  # a sample: its doc carries the header it was retrieved under
            header = entry.get("rag_header") if isinstance(entry.get("rag_header"), dict) else None
            key = ("sample", json.dumps(header, sort_keys=True))
            section = sections.setdefault(key, Section((header or {}).get("task"), header))
        elif "task" in record:
            section = sections.setdefault(("file", record["task"]), Section(record["task"], None))
        else:
            section = current if current is not None else sections.setdefault(("file", None), Section(None, None))
        _check_chunks(chunks, _is_external(section.header), path, line_number, item_id)
        # a sample log holds an item once per filter; a file written for the pack, once
        if "doc" not in record:
            earlier = first_line.setdefault((id(section), str(item_id)), line_number)
            if earlier != line_number:
                raise MedevalDataError(
                    f"{path}: line {line_number}: item {str(item_id)!r} was given already (line {earlier}). "
                    "Give each item's documents on one line."
                )
        section.items[str(item_id)] = chunks
    found = [s for s in sections.values() if s.items or s.header]
    if not any(s.items for s in found):
        raise MedevalDataError(
            f"{path}: no retrievals in this file. {_EXTERNAL_FIX if any(_is_external(s.header) for s in found) else _FIX}"
        )
    return found


def _shown(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_shown(v)}" for k, v in sorted(value.items()))
    return json.dumps(value) if isinstance(value, str) else str(value)


def _field_difference(name: str, theirs: Mapping[str, Any], ours: Mapping[str, Any]) -> str | None:
    if theirs[name] == ours[name]:
        return None
    if isinstance(theirs[name], dict) and isinstance(ours[name], dict):
        keys = sorted(k for k in {*theirs[name], *ours[name]} if theirs[name].get(k) != ours[name].get(k))
        theirs_shown = _shown({k: theirs[name].get(k) for k in keys})
        ours_shown = _shown({k: ours[name].get(k) for k in keys})
    else:
        theirs_shown, ours_shown = _shown(theirs[name]), _shown(ours[name])
    return f"{name}: the file's is {theirs_shown}, this run's is {ours_shown}"


def header_difference(theirs: Mapping[str, Any] | None, ours: Mapping[str, Any]) -> str | None:
    """The first field of :data:`HEADER_FIELDS` that differs, as "<field>: the file's ..., this run's ...";
    None when the section was made the way the task retrieves now."""
    if not theirs or any(name not in theirs for name in HEADER_FIELDS):
        return (
            "the file does not record how its retrievals were made (written by an older version, or by another "
            'retriever without "retriever": {"external": "<name>"} in its header)'
        )
    for name in HEADER_FIELDS:
        difference = _field_difference(name, theirs, ours)
        if difference:
            return difference
    return None


def section_difference(theirs: Mapping[str, Any] | None, ours: Mapping[str, Any]) -> str | None:
    """:func:`header_difference`, except for an external section: only its knowledge base and chunking
    (:data:`EXTERNAL_COMPARED`) must be this run's, since its ids name the chunks of both; when ``ours`` is
    external too, the retriever as well."""
    if not _is_external(theirs):
        if _is_external(ours):  # saving an external run's retrievals where the pack's own were
            return f"retriever: the file's is {_shown((theirs or {}).get('retriever'))}, this run's is {_shown(ours['retriever'])}"
        return header_difference(theirs, ours)
    assert theirs is not None
    if _is_external(ours) and theirs["retriever"] != ours["retriever"]:
        return _field_difference("retriever", theirs, ours)
    for name in EXTERNAL_COMPARED:
        difference = _field_difference(name, theirs, ours)
        if difference:
            return difference
    return None


def read_retrievals(path: Path, chunks_version_now: str) -> dict[str, list[dict[str, Any]]]:
    """item id -> its chunks, from every section of a file, checked against the chunks version."""
    sections = read_sections(path)
    stale = {str((s.header or {}).get("chunks_version")) for s in sections if s.header and "chunks_version" in s.header}
    stale -= {chunks_version_now}
    if stale:
        raise MedevalDataError(
            f"{path}: these retrievals were made on another corpus or chunking (chunks version {min(stale)}, "
            f"now {chunks_version_now}). Use the same knowledge files and rag_chunk_* settings as the run that "
            "wrote it, or retrieve again without rag_retrievals."
        )
    out: dict[str, list[dict[str, Any]]] = {}
    for section in sections:
        out.update(section.items)
    return out
