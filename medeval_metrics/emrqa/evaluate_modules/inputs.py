"""Inputs and per-item scorers shared by the emrQA ``evaluate`` modules.

They call the scorers of ``medeval_metrics.emrqa.metrics`` with the arguments the tasks' own
``process_results`` give them (``medeval_metrics.emrqa.tasks``), so the values are the tasks' values.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from typing import Any

import datasets

from medeval_metrics.emrqa import metrics as emrqa_metrics

CITATION = (
    "Pampari, Raghavan, Liang and Peng. emrQA: A Large Corpus for Question Answering on Electronic "
    "Medical Records. EMNLP 2018. arXiv:1809.00732"
)

EVIDENCE_FEATURES = datasets.Features(
    {"predictions": datasets.Value("string"), "references": datasets.Value("string"), "notes": datasets.Value("string")}
)
EVIDENCE_INPUTS = (
    "predictions: the model's output text (one evidence line per line; the first 10 lines count); "
    "references: each question's gold answers, as a JSON list (the tasks' answers_json column) or a list "
    "of dicts / GoldAnswer objects with evidence, evidence_start (character offset in the note, -1 if "
    "unknown), entity_type (single, empty or complex) and entities; notes: the clinical note text."
)

LOGICAL_FORM_FEATURES = datasets.Features(
    {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
)
LOGICAL_FORM_INPUTS = (
    "predictions: the model's output (its first non-empty line is the predicted logical form); "
    "references: the gold logical forms."
)
TEMPLATE_FEATURES = datasets.Features(
    {
        "predictions": datasets.Value("string"),
        "references": datasets.Value("string"),
        "templates": datasets.Value("string"),
    }
)
TEMPLATE_INPUTS = LOGICAL_FORM_INPUTS + " templates: the gold logical-form templates (slots written |name|)."


def encode_gold_answers(reference: Any) -> str:
    """A question's gold answers as the JSON text the tasks store (``answers_json``)."""
    if isinstance(reference, str):
        return reference
    if not isinstance(reference, (list, tuple)):
        raise TypeError(f"a reference is a list of gold answers (or its JSON text), not a {type(reference).__name__}.")
    answers = []
    for answer in reference:
        if isinstance(answer, emrqa_metrics.GoldAnswer):
            answer = dataclasses.asdict(answer)
        if not isinstance(answer, dict):
            raise TypeError(f"a gold answer is a dict or a GoldAnswer, not a {type(answer).__name__}.")
        answers.append(answer)
    return json.dumps(answers, sort_keys=True)


def _gold_answers(answers_json: str) -> list[Any]:
    answers = json.loads(answers_json)
    if not isinstance(answers, list):
        raise ValueError("a reference's JSON is not a list of gold answers.")
    return answers


def evidence_scorer(key: str) -> Callable[..., float]:
    """``key`` (relaxed_em, f1 or strict_em) of ``score_evidence``, as ``process_evidence`` calls it."""
    return staticmethod(
        lambda output, answers_json, notes: emrqa_metrics.score_evidence(
            output or "", _gold_answers(answers_json), notes
        )[key]
    )


def logical_form_scorer(key: str) -> Callable[..., float]:
    """``key`` (lf_acc or template_acc) of ``score_logical_form``, as ``process_logical_form`` calls it."""
    if key == "lf_acc":  # the exact match never reads the template
        return staticmethod(lambda output, gold_lf: emrqa_metrics.score_logical_form(output or "", gold_lf, "")[key])
    return staticmethod(
        lambda output, gold_lf, templates: emrqa_metrics.score_logical_form(output or "", gold_lf, templates)[key]
    )
