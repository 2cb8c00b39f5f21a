"""Validated public data sets kept as Arrow files between runs (keyed by the file's content and the code)."""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from medeval_metrics import files, json_records
from medeval_metrics.checksums import file_sha256
from medeval_metrics.safe_files import MedevalWriteError, atomic_open
from medeval_metrics.settings import DATASET_CACHE, FALSE_WORDS, env_setting

log = logging.getLogger("medeval.data")

DATASET_CACHE_ENV = DATASET_CACHE.name  # a folder, or "off"; default ~/.cache/medeval/datasets
_CACHE_OFF = {*FALSE_WORDS, "none"}
_unwritable_cache_noticed: set[str] = set()


def dataset_cache_root() -> Path | None:
    """Where validated public data sets are kept as Arrow files, or None when ``MEDEVAL_DATASET_CACHE=off``."""
    value = (env_setting(DATASET_CACHE) or "").strip()
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
    # this module and the readers that validate (a change to them invalidates what they validated)
    for path in (Path(__file__), Path(json_records.__file__), Path(files.__file__), *code_files):
        digest.update(Path(path).read_bytes())
    return digest.hexdigest()[:16]


def validated_dataset(
    path: Path,
    options: Mapping[str, Any],
    build_docs,
    schema: Any = None,
    code_files: Iterable[Path] = (),
    cache: bool = True,
    sha256: str | None = None,
):
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
    spec = {
        "kind": "validated-docs",
        "sha256": sha256 or file_sha256(path),
        "options": dict(options),
        "code": _code_digest(code_files),
        "datasets": datasets.__version__,
    }
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
            log.warning(
                "medeval: the cached copy %s of %s is unreadable (%s); validating the file again",
                cached,
                path,
                type(exc).__name__,
            )
    with collector_paused():  # validation and the Arrow conversion alike (10x the items: 12x the time without)
        table = pa.Table.from_pylist(build_docs(), schema=schema)
    if cached is not None:
        try:  # atomic: a reader sees the whole file or none (public sets only: a private one is never cached)
            with atomic_open(cached, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
                writer.write_table(table)
        except (OSError, MedevalWriteError) as exc:
            if str(cached.parent) not in _unwritable_cache_noticed:
                _unwritable_cache_noticed.add(str(cached.parent))
                log.warning(
                    "medeval: cannot write the data cache in %s (%s); data is validated on every run. "
                    "Set %s to a writable folder, or to 'off'.",
                    cached.parent,
                    exc,
                    DATASET_CACHE_ENV,
                )
    return datasets.Dataset(InMemoryTable(table), fingerprint=key)
