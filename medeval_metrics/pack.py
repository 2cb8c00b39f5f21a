"""The pack itself: its version and the folder of its task YAMLs (re-exported by ``medeval_metrics``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

__version__ = "0.1.0"


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
