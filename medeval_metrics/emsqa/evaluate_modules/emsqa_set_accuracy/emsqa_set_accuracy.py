"""EMSQA exact set-match accuracy (the ``acc`` of the emsqa_* tasks) as an evaluate module."""

from medeval_metrics import emsqa
from medeval_metrics.evaluate_modules import base


class EmsqaSetAccuracy(base.PerItemMeanMetric):
    result_key = "accuracy"
    description = "EMSQA accuracy: an item counts when the predicted set of option letters equals the gold set."
    citation = "Ge et al. 2025, arXiv:2511.10900"
    inputs_description = (
        "predictions: list of lists of option letters (an unparseable answer is an empty list); "
        "references: list of lists of gold letters."
    )
    per_item = base.letter_set_metric(lambda p, g: emsqa.score(p, g)["acc"])
