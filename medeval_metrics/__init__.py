"""medeval: medical QA tasks for lm-evaluation-harness (EMSQA, MedicationQA, emrQA).

Importing this package is cheap: heavy modules (datasets, torch, lm_eval) load lazily.
"""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

__all__ = ["__version__", "tasks_path"]


def _quiet_lm_eval_notices() -> None:
    # lm-eval imports this package to resolve the task YAMLs' !function loaders, before it loads any
    # data: the one moment to drop its per-task custom_dataset notice for the pack's tasks, under
    # plain `lm_eval --include_path` as under `medeval run`. A logging filter; imports no lm-eval.
    from medeval_metrics.lm_eval_compat import quiet_pack_custom_dataset_notice

    quiet_pack_custom_dataset_notice()


_quiet_lm_eval_notices()


def tasks_path() -> str:
    """Folder holding the pack's task YAMLs, for ``lm_eval --include_path``.

    Installed, the YAMLs live in ``medeval_metrics/tasks``; in a source checkout that is not
    installed they are the repository's top-level ``tasks/`` folder.
    """
    import importlib.util

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
