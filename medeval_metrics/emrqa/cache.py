"""The emrQA cache: one folder per (inputs, seed, preparation version), prepared on first use."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.data import file_sha256
from medeval_metrics.emrqa.sources import cache_root, resolve_inputs, split_seed
from medeval_metrics.emrqa.splits import PREP_VERSION, prepare

_digests: dict[tuple[Any, ...], str] = {}


def _fingerprint(path: Path) -> dict[str, Any]:
    """The input as the cache key sees it: its path and its content's sha256. Size and modification
    time alone let a relabelled file of the same size with its time restored (``cp -p``, ``rsync -a``,
    ``touch -r``) be scored from the old splits. The digest is computed once per process for a file
    whose size, times and inode are unchanged (every emrQA task of a run asks for it)."""
    stat = path.stat()
    memo = (str(path.resolve()), stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    if memo not in _digests:
        _digests[memo] = file_sha256(path)
    return {"path": str(path), "sha256": _digests[memo]}


def cache_dir_for(data_json: Path, data_ql: Path, seed: int, root: Path) -> Path:
    key = json.dumps(
        {"v": PREP_VERSION, "seed": seed, "json": _fingerprint(data_json), "ql": _fingerprint(data_ql)}, sort_keys=True
    )
    return root / hashlib.sha256(key.encode()).hexdigest()[:16]


def ensure_prepared(metadata: Mapping[str, Any] | None = None, log: Any = None) -> tuple[Path, dict[str, Any]]:
    """The prepared cache folder for the configured inputs, preparing it first if needed."""
    metadata = metadata or {}
    data_json, data_ql = resolve_inputs(metadata)
    seed = split_seed(metadata)
    folder = cache_dir_for(data_json, data_ql, seed, cache_root(metadata))
    manifest_path = folder / "manifest.json"
    if not manifest_path.exists():  # one summary line when done (``prepare``); progress bars on a terminal
        logging.getLogger(__name__).debug(
            "emrQA: preparing %s and %s (first use; later runs reuse %s)", data_json.name, data_ql.name, folder
        )
        prepare(data_json, data_ql, folder, seed=seed, log=log)
    return folder, json.loads(manifest_path.read_text(encoding="utf-8"))
