"""The emrQA cache: one folder per (inputs, seed, preparation version), prepared on first use."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Mapping

from medeval_metrics.emrqa.sources import cache_root, resolve_inputs, split_seed
from medeval_metrics.emrqa.splits import PREP_VERSION, prepare


def _fingerprint(path: Path) -> dict[str, Any]:
    stat = path.stat()
    return {"path": str(path), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}


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
        logging.getLogger(__name__).debug("emrQA: preparing %s and %s (first use; later runs reuse %s)",
                                          data_json.name, data_ql.name, folder)
        prepare(data_json, data_ql, folder, seed=seed, log=log)
    return folder, json.loads(manifest_path.read_text(encoding="utf-8"))
