"""lm-eval glue for emrQA, gathered: the names the task YAMLs (and users' own task files) reference as
``!function medeval_metrics.emrqa.tasks.<name>``. The work is done in focused modules: ``loaders``
(``custom_dataset``), ``prompts``, ``scoring`` (``process_results``, aggregations), ``sampling``,
``windowing``, ``context`` (does a prompt fit the model) and ``write_out`` (the ``--write_out`` warning).
"""

from __future__ import annotations

from medeval_metrics.emrqa import prompts as _prompts
from medeval_metrics.emrqa.context import ContextCheck, fits_context, generation_budget, noted
from medeval_metrics.emrqa.loaders import (
    PRIVATE_DOCUMENTS,
    load_classification,
    load_evidence,
    load_evidence_window,
    load_logical_forms,
)
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

# the tasks' doc_to_text: each prompt lm-eval renders is noted, to be counted when its item is scored
evidence_prompt = noted(_prompts.evidence_prompt)
classification_prompt = noted(_prompts.classification_prompt)

__all__ = [
    "DEFAULT_SAMPLE_SIZE",
    "PRIVATE_DOCUMENTS",
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
