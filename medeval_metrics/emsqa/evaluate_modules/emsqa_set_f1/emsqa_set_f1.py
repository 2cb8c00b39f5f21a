"""EMSQA per-item set F1, averaged (the ``f1`` of the emsqa_* tasks) as an evaluate module."""

from medeval_metrics import emsqa
from medeval_metrics.evaluate_modules import base


class EmsqaSetF1(base.PerItemMeanMetric):
    result_key = "f1"
    description = "EMSQA set F1 per item (both empty: 1, one empty: 0), averaged over items."
    citation = "Ge et al. 2025, arXiv:2511.10900"
    inputs_description = (
        "predictions: list of lists of option letters (an unparseable answer is an empty list); "
        "references: list of lists of gold letters."
    )
    per_item = base.letter_set_metric(lambda p, g: emsqa.score(p, g)["f1"])
