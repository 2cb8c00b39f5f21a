"""Where each benchmark's data comes from: one mechanism for every task.

Every data set has a *source*: a default public home (a Hugging Face Hub repository) and a
metadata key naming a local copy. The key can be set three ways, first match wins:

1. ``lm_eval ... --metadata '{"emsqa_public_path": "/data/test_open.json"}'``
2. the environment variable ``MEDEVAL_<KEY>`` (``MEDEVAL_EMSQA_PUBLIC_PATH=...``)
3. nothing: the Hub source is used (for data that has a public home).

How a setting is read: ``medeval_metrics.settings`` (``setting`` and ``flag_setting`` stay importable
from here for old import paths).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from medeval_metrics.errors import MedevalDataError
from medeval_metrics.settings import DATA_CHECKSUMS, DATASET_CACHE, FALSE_WORDS, TRUE_WORDS, env_var, flag_setting, is_true, setting

__all__ = [  # the settings names are re-exported: old import paths (data.setting, data.flag_setting) keep working
    "DataSource", "FALSE_WORDS", "MedevalDataError", "TRUE_WORDS", "env_var", "flag_setting", "setting",
]

log = logging.getLogger("medeval.data")


@dataclass(frozen=True)
class DataSource:
    """A data set the pack can read: from a local path (metadata/env) or a public Hub repo."""

    key: str  # metadata key, e.g. "emsqa_public_path"
    description: str  # what it is, for messages: "the EMSQA public test set"
    how_to_get: str  # what to download, from where
    hub_repo: str | None = None  # default public home on the Hugging Face Hub
    # file name -> sha256 of the published files (a local copy or download is compared with them)
    sha256: Mapping[str, str] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        _PINS.update(self.sha256)  # a file named like a pinned one is checked whichever loader reads it

    @property
    def env_var(self) -> str:
        return env_var(self.key)

    def how_to_point(self, example: str = "/path/to/file") -> str:
        return (
            f"Point the pack at a local copy with `--metadata '{{\"{self.key}\": \"{example}\"}}'` "
            f"on the lm_eval/medeval command line, or `export {self.env_var}={example}`."
        )

    def local_path(self, metadata: Mapping[str, Any] | None = None) -> Path | None:
        """The user's local copy, if one is configured; an error if it is configured but absent."""
        value = setting(metadata, self.key)
        if not value:
            return None
        origin = f"--metadata {self.key}" if (metadata or {}).get(self.key) else self.env_var
        path = Path(str(value)).expanduser()
        if not path.exists():
            raise MedevalDataError(
                f"{self.description}: {origin} points at {path}, which does not exist. "
                f"{self.how_to_get} {self.how_to_point()}"
            )
        check_known_checksum(path)
        return path.resolve()

    def missing(self, reason: str) -> MedevalDataError:
        """The error for a source that is neither configured locally nor reachable."""
        return MedevalDataError(
            f"{self.description} is not available: {reason}. {self.how_to_get} {self.how_to_point()}"
        )


def hub_offline() -> bool:
    return any(is_true(os.environ.get(var, "")) for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))


def download_hub_file(source: DataSource, filename_suffixes: Iterable[str], revision: str | None = None) -> Path:
    """Download the first file of ``source.hub_repo`` (a dataset repo) whose path ends with a suffix.

    Any failure (offline, unreachable, file not in the repo) becomes a MedevalDataError that says
    what to download and how to point the pack at it.
    """
    if source.hub_repo is None:
        raise source.missing("it has no public download")
    if hub_offline():
        raise source.missing(f"the Hub is disabled (HF_HUB_OFFLINE/HF_DATASETS_OFFLINE) and no local copy is set")
    suffixes = tuple(filename_suffixes)
    try:
        from huggingface_hub import hf_hub_download, list_repo_files

        files = list_repo_files(source.hub_repo, repo_type="dataset", revision=revision)
        matches = sorted((f for f in files if f.endswith(suffixes)), key=len)
        if not matches:
            raise source.missing(
                f"the Hub dataset {source.hub_repo} has no file ending in {', '.join(suffixes)}"
            )
        downloaded = Path(hf_hub_download(source.hub_repo, matches[0], repo_type="dataset", revision=revision))
    except MedevalDataError:
        raise
    except Exception as exc:  # network, auth, 404: all mean "get it yourself"
        raise source.missing(f"downloading from the Hub dataset {source.hub_repo} failed ({type(exc).__name__})") from exc
    return downloaded


# --------------------------------------------------------------------------- known checksums

CHECKSUM_ENV = DATA_CHECKSUMS.name  # "warn" (default), "error", or "off"
_PINS: dict[str, str] = {}  # file name -> sha256, from every DataSource defined so far (DataSource.sha256)


def known_checksums() -> dict[str, str]:
    """File name -> sha256 of every pinned public file: the ``sha256`` of each ``DataSource`` defined.

    A file is read through the source that defines its pins, so its pins are known before it is checked.
    """
    return dict(_PINS)


def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes, read in blocks (the one file digest of the pack)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


_digests: dict[tuple[str, int, int], str] = {}  # (path, size, mtime) -> sha256, so a file is hashed once


def check_known_checksum(path: Path, mode: str | None = None) -> str:
    """Compare a local file named like a pinned public file (``test_open.json``,
    ``MedInfo2019-QA-Medications.xlsx``...) with its source's pinned sha256.

    Returns "match", "mismatch" or "unpinned" (a name no source pins, a folder, or
    checking off). A mismatch means the scores will not be comparable with published ones: by
    default a warning (once per file) naming the file and both digests; ``MEDEVAL_DATA_CHECKSUMS=error``
    makes it a ``MedevalDataError``, ``=off`` skips the check (``mode`` overrides the variable).
    """
    path = Path(path)
    mode = (mode or os.environ.get(CHECKSUM_ENV) or "warn").strip().lower()
    if mode not in ("warn", "error", "off"):
        raise MedevalDataError(f"{CHECKSUM_ENV}={mode!r}: use 'warn' (the default), 'error' or 'off'.")
    expected = _PINS.get(path.name)
    if mode == "off" or expected is None or not path.is_file():
        return "unpinned"
    stat = path.stat()
    first_time = (str(path.resolve()), stat.st_size, stat.st_mtime_ns) not in _digests
    actual = _file_digest(path)
    if actual == expected:
        return "match"
    if mode == "error":
        raise MedevalDataError(
            f"{path}: not the published {path.name} (sha256 {actual}, expected {expected}); scores on it would not "
            f"be comparable with published ones. Download it again, or set {CHECKSUM_ENV}=warn to use it anyway."
        )
    if first_time:
        log.warning(
            "medeval: %s is not the published %s (sha256 %s, expected %s); scores on it are not comparable with "
            "published ones. Download it again if that is unintended (%s=error makes this an error, =off silences it).",
            path, path.name, actual, expected, CHECKSUM_ENV,
        )
    return "mismatch"


# --------------------------------------------------------------------------- what a file is

_ZIP_MAGIC = b"PK\x03\x04"
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # Compound File: old .xls/.doc, and every encrypted OOXML file
_SNIFF_BYTES = 4096
_OLE_SCAN_LIMIT = 64 * 1024 * 1024

FILE_KINDS: dict[str, str] = {
    # kind -> how messages name it
    "folder": "a folder",
    "empty": "an empty file",
    "xlsx": "an Excel workbook (.xlsx)",
    "encrypted-office": "a password-protected (encrypted) Office file",
    "ole-office": "an old-format Office file (.xls or .doc)",
    "zip": "a ZIP archive",
    "gzip": "a gzip-compressed file",
    "pdf": "a PDF document",
    "parquet": "a Parquet file",
    "html": "an HTML web page (the page around the file, saved instead of the raw file?)",
    "lfs-pointer": "a Git LFS pointer (the data itself was not downloaded: run `git lfs pull`)",
    "utf16": "UTF-16 text (what Excel's \"Unicode Text\" and Windows Notepad write)",
    "json": "JSON text",
    "csv": "CSV text",
    "text": "text",
    "binary": "binary data",
}


def file_kind(path: Path) -> str:
    """What ``path`` is by its content, not its name: one of ``FILE_KINDS``.

    Cheap (the first few KB; an Office container is scanned for its encryption streams). Text is
    told apart only roughly ("json" starts with ``[``/``{``, "csv" has a separator in its first
    line); a loader still parses it and reports the exact problem.
    """
    path = Path(path)
    if path.is_dir():
        return "folder"
    with path.open("rb") as handle:
        head = handle.read(_SNIFF_BYTES)
    if not head:
        return "empty"
    if head.startswith(_ZIP_MAGIC):
        import zipfile

        try:
            with zipfile.ZipFile(path) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, OSError):
            return "zip"  # damaged or truncated: the reader that expected a ZIP says so
        return "xlsx" if "xl/workbook.xml" in names else "zip"
    if head.startswith(_OLE_MAGIC):
        with path.open("rb") as handle:
            container = handle.read(_OLE_SCAN_LIMIT)
        # An encrypted .xlsx/.docx is an OLE container with these two streams (MS-OFFCRYPTO 2.3.4).
        if "EncryptedPackage".encode("utf-16-le") in container and "EncryptionInfo".encode("utf-16-le") in container:
            return "encrypted-office"
        return "ole-office"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if head.startswith(b"%PDF"):
        return "pdf"
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf16"
    if b"\x00" in head:
        return "binary"
    text = head.decode("utf-8", errors="ignore").lstrip("\ufeff").lstrip()
    if text.startswith(("[", "{")):
        return "json"
    if text.startswith("version https://git-lfs.github.com/spec/"):
        return "lfs-pointer"
    if text[:15].lower().startswith(("<!doctype html", "<html")):
        return "html"
    first_line = text.split("\n", 1)[0]
    if any(separator in first_line for separator in (",", "\t", ";")):
        return "csv"
    return "text"


def _folder_hint(path: Path, suffixes: Iterable[str]) -> str:
    suffixes = tuple(s.lower() for s in suffixes)
    try:
        names = sorted(p.name for p in path.iterdir() if p.is_file() and p.suffix.lower() in suffixes)
    except OSError:
        names = []
    if not names:
        return f"it holds no {'/'.join(suffixes)} file."
    shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"it holds {shown}."


def refuse_wrong_file_kind(
    path: Path, description: str, accepted: Iterable[str], should_be: str, suffixes: Iterable[str] = ()
) -> str:
    """Raise a ``MedevalDataError`` when ``path`` is plainly not the kind of file a loader reads
    (a workbook or CSV where JSON is expected, a folder, an archive, a web page...); else return its kind.

    ``accepted``: the ``FILE_KINDS`` the loader reads (it still parses them and reports details);
    ``should_be``: what the file should be, for the message; ``suffixes``: file names to suggest
    when ``path`` is a folder.
    """
    path = Path(path)
    try:
        kind = file_kind(path)
    except OSError as exc:
        raise MedevalDataError(f"{path}: cannot read {description} ({exc.strerror}).") from exc
    accepted = set(accepted)
    if kind in accepted:
        return kind
    if kind == "folder":
        raise MedevalDataError(
            f"{path}: {description} is a folder; point at the file itself ({should_be}): "
            f"{_folder_hint(path, suffixes)}"
        )
    if kind == "empty":
        raise MedevalDataError(f"{path}: {description} is empty. Point the pack at the full file.")
    fix = {
        "encrypted-office": " Open it in Excel, remove the password (File > Info > Protect Workbook) and save it "
        "again, or point at the unprotected original.",
        "ole-office": " Open it and save it as .xlsx (Excel Workbook).",
        "gzip": " Decompress it first (gunzip).",
        "zip": " Extract the file from the archive first.",
        "utf16": " Re-save it as UTF-8.",
    }.get(kind, "")
    raise MedevalDataError(f"{path}: {description} should be {should_be}, but this file is {FILE_KINDS[kind]}.{fix}")


# --------------------------------------------------------------------------- JSON / JSON Lines

JSON_RECORDS_SHOULD_BE = "a JSON array of records, a JSON object holding one such array, or JSON Lines (one object per line), in UTF-8"


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


def _too_deep(path: Path, description: str, where: str = "") -> MedevalDataError:
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
        raise _too_deep(path, description) from None
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
            raise _too_deep(path, description, f" (line {line_number})") from None
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


# --------------------------------------------------------------------------- validated-dataset cache

DATASET_CACHE_ENV = DATASET_CACHE.name  # a folder, or "off"; default ~/.cache/medeval/datasets
_CACHE_OFF = {*FALSE_WORDS, "none"}
_unwritable_cache_noticed: set[str] = set()


def dataset_cache_root() -> Path | None:
    """Where validated public data sets are kept as Arrow files, or None when ``MEDEVAL_DATASET_CACHE=off``."""
    value = os.environ.get(DATASET_CACHE_ENV, "").strip()
    if value.lower() in _CACHE_OFF:
        return None
    if value:
        return Path(value).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "medeval" / "datasets"


@contextlib.contextmanager
def collector_paused():
    """Loading builds many small containers and no reference cycles: the cyclic collector's full
    passes over them made a 10x EMSQA file take 20-40x the time (measured in scripts/bench_emsqa.py)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _code_digest(code_files: Iterable[Path]) -> str:
    digest = hashlib.sha256()
    for path in (Path(__file__), *code_files):
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


def validated_dataset(path: Path, options: Mapping[str, Any], build_docs, schema: Any = None,
                      code_files: Iterable[Path] = (), cache: bool = True, sha256: str | None = None):
    """The validated docs of ``path`` as a ``datasets.Dataset``.

    ``build_docs()`` reads and validates the file (raising ``MedevalDataError`` on bad data). Its
    result is kept as an Arrow file keyed by the file's content (sha256), the loader's ``options``, the validating code (``code_files`` and this module) and the datasets
    version, so a later run of an unchanged file memory-maps it instead of validating it again
    (3,721 EMSQA items: about 1 ms instead of 70-100 ms). Bad data is never cached; a cache that
    cannot be written is noticed once and skipped; ``cache=False`` or ``MEDEVAL_DATASET_CACHE=off``
    keeps everything in memory. ``sha256``: the file's digest, if the caller already has it.
    """
    import datasets
    import pyarrow as pa
    from datasets.table import InMemoryTable, MemoryMappedTable

    path = Path(path)
    # The content's digest, not the modification time: a file rewritten within the clock's tick
    # (a few ms) with the same size must not be mistaken for the old one. sha256 of 2.4 MB: ~1.5 ms.
    spec = {"kind": "validated-docs", "sha256": sha256 or file_sha256(path), "options": dict(options),
            "code": _code_digest(code_files), "datasets": datasets.__version__}
    key = hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:24]
    root = dataset_cache_root() if cache else None
    cached = None if root is None else root / f"{key}.arrow"
    try:
        present = cached is not None and cached.is_file()
    except OSError:  # a folder the user cannot enter (Python 3.11's is_file raises on EACCES)
        present = False
    if present:
        try:
            return datasets.Dataset(MemoryMappedTable.from_file(str(cached)), fingerprint=key)
        except (OSError, pa.ArrowInvalid) as exc:  # a damaged file: validate again and replace it
            log.warning("medeval: the cached copy %s of %s is unreadable (%s); validating the file again",
                        cached, path, type(exc).__name__)
    with collector_paused():  # validation and the Arrow conversion alike (10x the items: 12x the time without)
        table = pa.Table.from_pylist(build_docs(), schema=schema)
    if cached is not None:
        staging = cached.with_name(f"{cached.name}.tmp-{os.getpid()}")
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            with pa.OSFile(str(staging), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
            os.replace(staging, cached)  # atomic: a reader sees the whole file or none
        except OSError as exc:
            with contextlib.suppress(OSError):
                staging.unlink(missing_ok=True)
            if str(cached.parent) not in _unwritable_cache_noticed:
                _unwritable_cache_noticed.add(str(cached.parent))
                log.warning("medeval: cannot write the data cache in %s (%s); data is validated on every run. "
                            "Set %s to a writable folder, or to 'off'.", cached.parent, exc, DATASET_CACHE_ENV)
    return datasets.Dataset(InMemoryTable(table), fingerprint=key)


# --------------------------------------------------------------------------- what was scored, in the results

def record_scored_files(description: str, paths: Iterable[Path], items: int) -> dict[str, Any]:
    """Put the scored data's file names, sha256 and item count into the running task's config, which
    lm-eval writes to ``results["configs"][task]["metadata"]["scored_data"]``: a model card's number then
    says which file it came from, however the path was given (``--metadata``, environment, Hub).
    Names only, not folders (a path can name a person or a machine). Returns the record."""
    return record_scored_data(description, [{"file": Path(p).name, "sha256": _file_digest(Path(p))} for p in paths],
                              items)


def record_scored_data(description: str, files: list[dict[str, str]], items: int) -> dict[str, Any]:
    """``record_scored_files`` with digests the caller already has (``[{"file": name, "sha256": ...}]``)."""
    from medeval_metrics.lm_eval_compat import loading_task_config

    record = {"description": description, "files": files, "items": items}
    config = loading_task_config()
    if config is not None:
        config.metadata = {**(config.metadata or {}), "scored_data": record}
    return record


def _file_digest(path: Path) -> str:
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        _digests[key] = file_sha256(path)
    return _digests[key]
