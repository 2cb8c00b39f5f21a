"""lm-eval glue for emrQA, gathered: the names the task YAMLs (and users' own task files) reference as
``!function medeval_metrics.emrqa.tasks.<name>``. The work is done in focused modules: ``loaders``
(``custom_dataset``), ``prompts``, ``scoring`` (``process_results``, aggregations), ``sampling``,
``windowing``, ``context`` (does a prompt fit the model) and ``write_out`` (the ``--write_out`` warning).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from medeval_metrics.emrqa import prompts as _prompts
from medeval_metrics.emrqa.context import ContextCheck, fits_context, generation_budget, note
from medeval_metrics.emrqa.loaders import load_classification, load_evidence, load_evidence_window, load_logical_forms
from medeval_metrics.emrqa.prompts import evidence_target, lf_prompt, lf_target
from medeval_metrics.emrqa.sampling import DEFAULT_SAMPLE_SIZE, allocate, sample_size, stratified_sample
from medeval_metrics.emrqa.scoring import (
    aggregate_macro_f1,
    macro_f1_stderr,
    process_classification,
    process_evidence,
    process_logical_form,
)
from medeval_metrics.emrqa.windowing import WINDOW_LINES, window_doc
from medeval_metrics.emrqa.write_out import WRITE_OUT_WARNING, writes_out


# The tasks' doc_to_text: each doc whose prompt lm-eval renders is noted, to be counted when its item is scored.
def evidence_prompt(doc: Mapping[str, Any]) -> str:
    """The evidence tasks' prompt (``prompts.evidence_prompt``)."""
    return note(doc, _prompts.evidence_prompt(doc))


def classification_prompt(doc: Mapping[str, Any]) -> str:
    """The class-label tasks' prompt (``prompts.classification_prompt``)."""
    return note(doc, _prompts.classification_prompt(doc))


__all__ = [
    "DEFAULT_SAMPLE_SIZE",
    "WINDOW_LINES",
    "WRITE_OUT_WARNING",
    "ContextCheck",
    "aggregate_macro_f1",
    "allocate",
    "classification_prompt",
    "evidence_prompt",
    "evidence_target",
    "fits_context",
    "generation_budget",
    "lf_prompt",
    "lf_target",
    "load_classification",
    "load_evidence",
    "load_evidence_window",
    "load_logical_forms",
    "macro_f1_stderr",
    "process_classification",
    "process_evidence",
    "process_logical_form",
    "sample_size",
    "stratified_sample",
    "window_doc",
    "writes_out",
]
