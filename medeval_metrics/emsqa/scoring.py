"""EMSQA scoring: exact-set accuracy and per-item set F1 (the paper's definitions)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from medeval_metrics.emsqa.extract import is_invalid_letter_answer
from medeval_metrics.emsqa.filters import read_flexible
from medeval_metrics.emsqa.strict import read_strict


def set_f1(predicted: Iterable[str], gold: Iterable[str]) -> float:
    """Per-item set F1: both empty -> 1.0, exactly one empty -> 0.0, else 2PR/(P+R)."""
    p, g = set(predicted), set(gold)
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    overlap = len(p & g)
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(p), overlap / len(g)
    return 2 * precision * recall / (precision + recall)


def score(
    predicted: list[str] | None, gold: Iterable[str], valid_letters: Iterable[str] | None = None
) -> dict[str, float]:
    """The per-item metrics: ``acc`` (exact set match), ``f1`` (set F1), ``unparseable`` (no answer)
    and, when the item's ``valid_letters`` are given, ``invalid_letter`` (an answer made only of
    letters that are not options; such letters stay in the set as wrong picks, as in the authors'
    scoring, so ``["a", "e"]`` against gold ``["a"]`` has F1 2/3)."""
    pred = predicted or []
    gold_set = set(gold)
    metrics = {
        "acc": float(set(pred) == gold_set),
        "f1": set_f1(pred, gold_set),
        "unparseable": float(predicted is None),
    }
    if valid_letters is not None:
        metrics["invalid_letter"] = float(is_invalid_letter_answer(predicted, valid_letters))
    return metrics


def process_results(doc: dict[str, Any], results: Sequence[Any]) -> dict[str, float]:
    """Generative variants: ``results[0]`` is the filtered answer (letters or ``None``)."""
    predicted = results[0]
    if isinstance(predicted, str):  # an unfiltered raw response (a user's own filter list): either format counts
        text = predicted
        predicted = read_strict(text, "list", doc["letters"])
        predicted = read_flexible(text, doc, "object") if predicted is None else predicted
    # the filters mark how they read: in the requested format (strict.FormatRead, the same under both filters)
    # or by the opt-in extraction model (fallback.ModelRead), counted so a reader sees how many
    return {
        **score(predicted, doc["gold"], doc["letters"]),
        "requested_format": float(getattr(predicted, "in_format", False)),
        "extracted_by_model": float(getattr(predicted, "by_model", False)),
    }


def process_results_mc(doc: dict[str, Any], results: Sequence[tuple[float, bool]]) -> dict[str, float]:
    """Log-likelihood variant: the prediction is the single most likely option, scored as a set."""
    logliks = [ll for ll, _ in results]
    best = max(range(len(logliks)), key=lambda i: logliks[i])
    predicted = [doc["letters"][best]]
    metrics = score(predicted, doc["gold"])
    del metrics["unparseable"]
    return metrics
