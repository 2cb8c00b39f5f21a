"""On-disk cache of built indexes, keyed by what determines them (corpus content, chunking, retriever).

Two processes (or the ranks of a data-parallel run) asking for the same index at once build it
once: the builder holds an exclusive lock on ``<key>.lock`` and writes into a temporary folder that
is renamed into place when complete; the others wait on the lock and then load the finished folder.
A folder is only ever used if its ``complete.json`` marker exists, so a killed build leaves nothing
that a later run would trust.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.files import exclusive_lock

CACHE_FORMAT = 2
_MARKER = "complete.json"


def cache_key(spec: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps({"format": CACHE_FORMAT, **spec}, sort_keys=True).encode()).hexdigest()[:24]


def default_cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "medeval" / "retrieval"


def cached_build(root: Path, spec: Mapping[str, Any], build: Callable[[Path], None]) -> tuple[Path, bool]:
    """The folder holding the index for ``spec``, built by ``build(folder)`` if absent.

    Returns ``(folder, built_here)``; ``built_here`` is False when the folder came from the cache.
    """
    root = Path(root)
    key = cache_key(spec)
    final = root / key
    if (final / _MARKER).exists():
        return final, False
    with exclusive_lock(root / f"{key}.lock"):
        if (final / _MARKER).exists():  # another process finished it while we waited
            return final, False
        root.mkdir(parents=True, exist_ok=True)
        # a fresh private folder of a random name: nothing planted at a predictable name is written through
        staging = Path(tempfile.mkdtemp(prefix=f"{key}.building-", dir=root))
        try:
            build(staging)
            (staging / _MARKER).write_text(json.dumps(dict(spec), sort_keys=True, indent=1), encoding="utf-8")
            shutil.rmtree(final, ignore_errors=True)  # an incomplete leftover without marker
            os.replace(staging, final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return final, True
