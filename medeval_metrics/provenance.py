"""What was scored, in the results: the data's file names, sha256 and item count in the task's config."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from medeval_metrics.checksums import file_digest
from medeval_metrics.lm_eval_compat import loading_task_config


def record_scored_files(description: str, paths: Iterable[Path], items: int) -> dict[str, Any]:
    """Put the scored data's file names, sha256 and item count into the running task's config, which
    lm-eval writes to ``results["configs"][task]["metadata"]["scored_data"]``: a model card's number then
    says which file it came from, however the path was given (``--metadata``, environment, Hub).
    Names only, not folders (a path can name a person or a machine). Returns the record."""
    return record_scored_data(
        description, [{"file": Path(p).name, "sha256": file_digest(Path(p))} for p in paths], items
    )


def record_scored_data(description: str, files: list[dict[str, str]], items: int) -> dict[str, Any]:
    """``record_scored_files`` with digests the caller already has (``[{"file": name, "sha256": ...}]``)."""
    record = {"description": description, "files": files, "items": items}
    config = loading_task_config()
    if config is not None:
        config.metadata = {**(config.metadata or {}), "scored_data": record}
    return record
