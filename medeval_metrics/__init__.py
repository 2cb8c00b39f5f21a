"""medeval: medical QA tasks for lm-evaluation-harness (EMSQA, MedicationQA, emrQA).

Importing this package is cheap and changes nothing outside it: heavy modules (datasets, torch, lm_eval) load
lazily, and no lm-eval attribute, logger or process-wide hook is touched.
"""

from __future__ import annotations

from medeval_metrics.pack import __version__, tasks_path

__all__ = ["__version__", "tasks_path"]
