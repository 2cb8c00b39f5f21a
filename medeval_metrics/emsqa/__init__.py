"""EMSQA (Ge et al. 2025, arXiv:2511.10900): loaders, prompts, answer extraction and set metrics.

Items may have several correct options, so an answer is a *set* of letters. The paper's metrics:
``acc`` is exact set match; ``f1`` is per-item set F1 (both sets empty scores 1, exactly one empty
scores 0), averaged over items. lm-eval's own multiple-target scoring counts "any gold letter" as
correct, which is wrong for multi-answer items, so every variant here scores through
``process_results``.

Modules: ``data`` (sources, validation, loaders), ``prompts``, ``extract`` (answer reading),
``scoring`` (set metrics). The names the task YAMLs use are re-exported here.
"""

from medeval_metrics.emsqa.data import (
    LEVEL_NAMES,
    LEVELS,
    PRIVATE_SOURCE,
    PUBLIC_SOURCE,
    SUBJECT_AREAS,
    DeferredPool,
    fewshot_pool,
    load_docs,
    load_private,
    load_public,
    normalise_record,
)
from medeval_metrics.emsqa.extract import extract_answer, strip_reasoning
from medeval_metrics.emsqa.filters import ExtractAnswerFilter, StrictAnswerFilter
from medeval_metrics.emsqa.prompts import (
    doc_to_choice_mc,
    doc_to_target,
    doc_to_target_cot,
    doc_to_target_mc,
    doc_to_text,
    doc_to_text_cot,
    doc_to_text_expert_cot,
    doc_to_text_mc,
    expert_standpoint,
)
from medeval_metrics.emsqa.scoring import process_results, process_results_mc, score, set_f1

__all__ = [
    "LEVELS",
    "LEVEL_NAMES",
    "PRIVATE_SOURCE",
    "PUBLIC_SOURCE",
    "SUBJECT_AREAS",
    "DeferredPool",
    "ExtractAnswerFilter",
    "StrictAnswerFilter",
    "doc_to_choice_mc",
    "doc_to_target",
    "doc_to_target_cot",
    "doc_to_target_mc",
    "doc_to_text",
    "doc_to_text_cot",
    "doc_to_text_expert_cot",
    "doc_to_text_mc",
    "expert_standpoint",
    "extract_answer",
    "fewshot_pool",
    "load_docs",
    "load_private",
    "load_public",
    "normalise_record",
    "process_results",
    "process_results_mc",
    "score",
    "set_f1",
    "strip_reasoning",
]
