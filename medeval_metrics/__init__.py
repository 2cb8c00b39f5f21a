"""medeval: medical QA tasks for lm-evaluation-harness (EMSQA, MedicationQA, emrQA).

Importing this package is cheap: heavy modules (datasets, torch, lm_eval) load lazily.
"""

from __future__ import annotations

from medeval_metrics.lm_eval_compat import quiet_pack_custom_dataset_notice
from medeval_metrics.pack import __version__, tasks_path

__all__ = ["__version__", "tasks_path"]


# lm-eval imports this package to resolve the task YAMLs' !function loaders, before it loads any
# data: the one moment to drop its per-task custom_dataset notice for the pack's tasks, under
# plain `lm_eval --include_path` as under `medeval run`. A logging filter; imports no lm-eval.
quiet_pack_custom_dataset_notice()
