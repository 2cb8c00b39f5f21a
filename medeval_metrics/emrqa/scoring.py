"""emrQA's ``process_results`` and aggregations: the scores of ``metrics`` on one model output."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from medeval_metrics.emrqa import metrics as M
from medeval_metrics.emrqa.context import fits_context


def _output(results: Iterable[Any]) -> str:
    results = list(results)
    return str(results[0]) if results else ""


def process_evidence(doc: Mapping[str, Any], results: Iterable[Any]) -> dict[str, float]:
    scores = M.score_evidence(_output(results), json.loads(doc["answers_json"]), doc["note"])
    scores["prompt_too_long"] = float(not fits_context(doc))  # the budget: the task's, read when scored
    return scores


def process_logical_form(doc: Mapping[str, Any], results: Iterable[Any]) -> dict[str, float]:
    return M.score_logical_form(_output(results), doc["logical_form"], doc["lf_template"])


def process_classification(doc: Mapping[str, Any], results: Iterable[Any]) -> dict[str, Any]:
    prediction = M.parse_label(_output(results), doc["labels"])
    pair = (doc["label"], prediction)
    # macro_f1 is corpus-level: its items are (gold, predicted) pairs, aggregated once.
    return {
        "acc": float(prediction == doc["label"]),
        "macro_f1": pair,
        "unparseable": float(prediction is None),
        "prompt_too_long": float(not fits_context(doc)),
    }


def macro_f1_stderr(items: list[tuple[str, str | None]]) -> float:
    """Seeded bootstrap standard error of macro-F1 (resampling items), from a run's logged samples' (gold,
    predicted) pairs: lm-eval reports "N/A" as the stderr of an aggregation it does not know."""
    return M.bootstrap_stderr([tuple(item) for item in items])


def aggregate_macro_f1(items: list[tuple[str, str | None]]) -> float:
    return M.macro_f1([tuple(item) for item in items])
