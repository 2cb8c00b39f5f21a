"""Shared base of the pack's ``evaluate`` modules: the mean of a per-item score.

Module files import this module (not the class name) so that the only ``evaluate`` module class
in their namespace is their own: ``evaluate.load`` takes the first one it finds.
"""

from __future__ import annotations

from typing import Any, Callable

import datasets
import evaluate

from medeval_metrics.stats import mean_and_stderr

LETTER_SETS = datasets.Features(
    {"predictions": datasets.Sequence(datasets.Value("string")), "references": datasets.Sequence(datasets.Value("string"))}
)


class PerItemMeanMetric(evaluate.Metric):
    """``{result_key: mean, result_key + "_stderr": stderr}`` of ``per_item(prediction, reference)``,
    the same mean (and the same stderr formula) as lm-eval's ``mean`` aggregation.

    Columns in ``features`` beyond predictions and references (e.g. a logical-form template, or a
    clinical note for evidence scoring) reach ``per_item`` as keyword arguments, item by item.
    Errors never quote the inputs (emrQA inputs hold patient notes).
    """

    result_key: str = "score"
    description: str = ""
    citation: str = ""
    inputs_description: str = ""
    features: datasets.Features = LETTER_SETS

    @staticmethod
    def per_item(prediction: Any, reference: Any, **columns: Any) -> float:  # overridden by each module
        raise NotImplementedError

    def _info(self) -> evaluate.MetricInfo:
        return evaluate.MetricInfo(
            description=self.description,
            citation=self.citation,
            inputs_description=self.inputs_description,
            features=self.features,
            reference_urls=[],
        )

    def _compute(self, predictions: list[Any], references: list[Any], **columns: list[Any]) -> dict[str, float]:
        if not predictions:
            raise ValueError(f"{self.name}: no predictions to score.")
        scores = [
            float(self.per_item(p, r, **{name: values[i] for name, values in columns.items()}))
            for i, (p, r) in enumerate(zip(predictions, references))
        ]
        value, stderr = mean_and_stderr(scores)
        return {self.result_key: value, f"{self.result_key}_stderr": stderr}


def letter_set_metric(scorer: Callable[[Any, Any], float]) -> Callable[[Any, Any], float]:
    """Per-item scorer on letter lists, case-insensitive as the tasks' answer extraction."""
    return staticmethod(lambda prediction, reference: scorer([p.lower() for p in prediction or []], [r.lower() for r in reference]))
