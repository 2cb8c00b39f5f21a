"""Shared base of the pack's ``evaluate`` modules: the mean of a per-item score.

Module files import this module (not the class name) so that the only ``evaluate`` module class
in their namespace is their own: ``evaluate.load`` takes the first one it finds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import datasets
import evaluate

from medeval_metrics.stats import mean_and_stderr

LETTER_SETS = datasets.Features(
    {
        "predictions": datasets.Sequence(datasets.Value("string")),
        "references": datasets.Sequence(datasets.Value("string")),
    }
)


class PerItemMeanMetric(evaluate.Metric):
    """``{result_key: mean, result_key + "_stderr": stderr}`` of ``per_item(prediction, reference)``,
    the same mean (and the same stderr formula) as lm-eval's ``mean`` aggregation.

    Columns in ``features`` beyond predictions and references (e.g. a logical-form template, or a
    clinical note for evidence scoring) reach ``per_item`` as keyword arguments, item by item.
    ``encode_reference`` turns a reference into its stored form before ``evaluate`` checks it
    against ``features`` (e.g. emrQA gold answers given as dicts, stored as JSON text).
    Errors never quote the inputs (emrQA inputs hold patient notes): ``evaluate``'s own format
    errors print the inputs, so only their first line is kept.
    """

    result_key: str = "score"
    description: str = ""
    citation: str = ""
    inputs_description: str = ""
    features: datasets.Features = LETTER_SETS

    @staticmethod
    def per_item(prediction: Any, reference: Any, **columns: Any) -> float:  # overridden by each module
        raise NotImplementedError

    @staticmethod
    def encode_reference(reference: Any) -> Any:
        return reference

    def add_batch(self, *, predictions: Any = None, references: Any = None, **columns: Any) -> None:
        """Add a batch of inputs (``evaluate`` appends the module's inputs description here)."""
        if references is not None:
            references = self._unquoted(lambda: [self.encode_reference(r) for r in references])
        self._unquoted(
            lambda: super(PerItemMeanMetric, self).add_batch(predictions=predictions, references=references, **columns)
        )

    def add(self, *, prediction: Any = None, reference: Any = None, **columns: Any) -> None:
        """Add one item's inputs (``evaluate`` appends the module's inputs description here)."""
        if reference is not None:
            reference = self._unquoted(lambda: self.encode_reference(reference))
        self._unquoted(
            lambda: super(PerItemMeanMetric, self).add(prediction=prediction, reference=reference, **columns)
        )

    def _unquoted(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except (ValueError, TypeError, KeyError) as exc:
            # evaluate appends the offending inputs after the first line of its message.
            first_line = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise ValueError(
                f"{self.name}: {first_line.rstrip('.')}. Expected inputs: {self.inputs_description or self.features}"
            ) from None

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
        scores = []
        for i, (p, r) in enumerate(zip(predictions, references)):
            try:
                scores.append(float(self.per_item(p, r, **{name: values[i] for name, values in columns.items()})))
            except (ValueError, TypeError, KeyError) as exc:  # the scorers' messages name no input text
                raise ValueError(f"{self.name}: item {i}: {type(exc).__name__}: {exc}") from None
        value, stderr = mean_and_stderr(scores)
        return {self.result_key: value, f"{self.result_key}_stderr": stderr}


def letter_set_metric(scorer: Callable[[Any, Any], float]) -> Callable[[Any, Any], float]:
    """Per-item scorer on letter lists, case-insensitive as the tasks' answer extraction."""
    return staticmethod(
        lambda prediction, reference: scorer([p.lower() for p in prediction or []], [r.lower() for r in reference])
    )
