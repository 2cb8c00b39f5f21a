"""The pack itself: its version and the folder of its task YAMLs (re-exported by ``medeval_metrics``)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path

__version__ = "0.1.0"


@functools.lru_cache(maxsize=1)  # where the package is does not change in a process; the pre-run checks ask 1,400 times
def tasks_path() -> str:
    """Folder holding the pack's task YAMLs, for ``lm_eval --include_path``.

    Installed, the YAMLs live in ``medeval_metrics/tasks``; in a source checkout that is not
    installed they are the repository's top-level ``tasks/`` folder.
    """
    spec = importlib.util.find_spec("medeval_metrics.tasks")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            if Path(location, "emsqa").is_dir():
                return str(Path(location).resolve())
    checkout = Path(__file__).resolve().parent.parent / "tasks"
    if checkout.is_dir():
        return str(checkout)
    raise RuntimeError(
        "medeval_metrics is installed without its task YAMLs; reinstall with `pip install medeval-metrics`."
    )


def task_folders() -> tuple[str, ...]:
    """``tasks_path()``, then the tasks folder beside every further home of the package (a subpackage folder
    added to ``medeval_metrics.__path__``, as a scratch checkout with one more benchmark is): where task YAMLs are."""
    # the package itself, not re-imported; its homes are the key (a test adds one at run time)
    return _task_folders(tasks_path(), tuple(getattr(sys.modules.get(__package__), "__path__", ())))


@functools.lru_cache(maxsize=8)
def _task_folders(first: str, homes: tuple[str, ...]) -> tuple[str, ...]:
    folders = [first]
    for home in homes:
        for candidate in (Path(home) / "tasks", Path(home).parent / "tasks"):
            if candidate.is_dir() and str(candidate.resolve()) not in folders:
                folders.append(str(candidate.resolve()))
    return tuple(folders)
