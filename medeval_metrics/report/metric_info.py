"""How a benchmark's metrics are named, published and checked, read from its spec (``BenchmarkSpec.reporting``).

Only a pack benchmark's listed metrics with ``in_model_index`` go into the model-index (other metrics, e.g.
per-judge success rates, are shown in the tables only). A task outside the pack (a user's suite) is shown in
the tables under lm-eval's metric names, never put into the model-index (the pack knows no dataset id for it).

Every number the report publishes is checked first (``value_problem``, ``stderr_problem``). A score that is
not a number (text other than lm-eval's "N/A" for a statistic without a value, true/false, null), not finite
(NaN, Infinity) or outside its metric's range (the spec's ``MetricInfo.checked_range``: its ``bounds``, else its
figure ``scale``: rates and accuracies 0-1, judge scores 1-5, BLEU 0-100, retrieved documents 0 up), or a standard error that is negative, not finite or not a number, comes from a
damaged or edited file or a broken scorer, never from a model. ``medeval report`` refuses it: one line naming
the file, the task and the metric (exit 2). With ``--skip-bad-numbers`` it is left out of every file (the card,
``model_index.yaml``, ``results.md``, breakdowns, ``report.html``) and listed in the report's notes and on the
console. A task outside the pack, or a metric its spec does not list, has no known range: the rest is checked.
Where: the results file's values and stderrs as the score rows are made (``tables.score_rows`` makes rows of
the good ones, ``tables.bad_numbers`` lists the others); the per-item values the report averages from the
samples (``tables.sample_problems``), taken out of the run's samples when bad.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from medeval_metrics.spec import MetricInfo, Reporting

BenchmarkReporting = Reporting  # the name this module used before the specs held the tables

__all__ = [
    "BadNumber",
    "BenchmarkReporting",
    "MetricInfo",
    "headline_filter",
    "is_proportion",
    "metric_info",
    "metric_range",
    "ordered_filters",
    "primary_metric",
    "reading_of",
    "reporting_for",
    "stderr_problem",
    "task_primary_metric",
    "value_problem",
]

_DEFAULT_TASK_TYPE = "question-answering"


def _listed(benchmark: str) -> Reporting | None:
    from medeval_metrics import registry

    return registry.reporting_for(benchmark)


def reporting_for(benchmark: str) -> Reporting:
    return _listed(benchmark) or Reporting(benchmark, _DEFAULT_TASK_TYPE, "", {})


def metric_info(benchmark: str, metric: str) -> MetricInfo:
    listed = _listed(benchmark)
    if listed is None:
        return MetricInfo(metric, metric)
    # a metric the spec does not list: under its own name, with the diagnostics
    return listed.info(metric) or MetricInfo(metric, metric, in_model_index=False, headline=False)


def is_proportion(benchmark: str, metric: str, item_values) -> bool:
    """Whether ``metric``'s mean is a proportion (its interval Wilson's): as its spec says
    (``MetricInfo.proportion``; a metric may be 0 or 1 on every item of one run and still be no proportion, an F1);
    for a metric no spec lists (a task outside the pack), when every logged item's value is 0 or 1."""
    from medeval_metrics.stats import all_zero_or_one

    listed = _listed(benchmark) if benchmark else None
    info = listed.info(metric) if listed else None
    if info is not None:
        return info.proportion
    return all_zero_or_one(item_values)


def primary_metric(benchmark: str, task_metrics: list[str] | tuple[str, ...]) -> str:
    """The benchmark's headline metric, else the task's first metric."""
    primary = reporting_for(benchmark).primary_metric
    return primary if primary in task_metrics or not task_metrics else task_metrics[0]


def task_primary_metric(task: str, metrics: Sequence[str] = ()) -> tuple[str, str]:
    """(benchmark, headline metric) of a pack task; for a task outside the pack ("", the first of ``metrics``, the
    metrics it has, or "" without any)."""
    from medeval_metrics import registry

    benchmark = registry.benchmark_of(task)
    if benchmark is None:
        return "", (metrics[0] if metrics else "")
    return benchmark.name, primary_metric(benchmark.name, registry.task(task).metrics)


# --------------------------------------------------------------------------- readings: a task's filters


def reading_of(benchmark: str, filter_name: str):
    """The spec's ``Reading`` a filter of the benchmark's tasks is (by name or former name); None if unlisted."""
    listed = _listed(benchmark) if benchmark else None
    return listed.reading(filter_name) if listed else None


def ordered_filters(benchmark: str, filters) -> list[str]:
    """One task's filters in the order the report shows them: its spec's readings first, in the spec's order (the
    headline reading first), then any other filter by name (``Reporting.ordered_filters``)."""
    return reporting_for(benchmark).ordered_filters(filters)


def headline_filter(benchmark: str, filters) -> str:
    """The filter a task's headline numbers come from (``Reporting.headline_filter``): its spec's headline reading
    where the task has it, else the first of ``ordered_filters``; "" without filters."""
    return reporting_for(benchmark).headline_filter(filters)


# --------------------------------------------------------------------------- the numbers a report publishes


NO_VALUE = "N/A"  # lm-eval's value of a statistic it could not compute (and its stderr where it has none)
_SLACK = 1e-9  # float rounding of a mean of values at a bound of the range


@dataclass(frozen=True)
class BadNumber:
    """A number that cannot be published: where it is and why."""

    file: Path | str
    task: str
    metric: str  # with its filter, or the item it belongs to
    why: str

    def __str__(self) -> str:
        from medeval_metrics.breakdown import shown

        return f"{shown(self.file, 300)}: task {shown(self.task)}, metric {shown(self.metric, 80)}: {self.why}"


def metric_range(benchmark: str | None, metric: str) -> tuple[float, float] | None:
    """The range a pack metric's values lie in (its spec's ``MetricInfo.bounds``, else its ``scale``); None where
    none is known: a task outside the pack, a metric its benchmark's spec does not list."""
    from medeval_metrics import registry

    reporting = registry.reporting_for(benchmark) if benchmark else None
    info = reporting.info(metric) if reporting else None
    return None if info is None else info.checked_range


def value_problem(value: Any, bounds: tuple[float, float] | None = None) -> str | None:
    """Why ``value`` cannot be published as a score (None: it can)."""
    from medeval_metrics.breakdown import json_kind, shown

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{shown(repr(value))} is {json_kind(value)}, not a number"
    if not math.isfinite(value):
        return f"{value} is not a finite number"
    if bounds is not None:
        low, high = bounds
        span = high - low if math.isfinite(high - low) else 1.0  # an open end (inf) is no scale for the slack
        slack = _SLACK * max(1.0, span)
        if not low - slack <= value <= high + slack:
            return f"{value:g} is outside the metric's range {_bound(low)} to {_bound(high)}"
    return None


def _bound(value: float) -> str:
    return "no limit" if math.isinf(value) else f"{value:g}"


def stderr_problem(value: Any) -> str | None:
    """Why ``value`` cannot be published as a standard error (None: it can; none given, or "N/A", is no stderr)."""
    if value is None or value == NO_VALUE:
        return None
    problem = value_problem(value)
    if problem is None and value < 0:
        return f"{value:g} is a negative standard error"
    return problem


def item_metrics(task: str) -> tuple[str | None, tuple[str, ...]]:
    """(benchmark, metrics) whose per-item values the report averages for ``task``: its breakdown's metrics and its
    headline metric (the page's item score)."""
    from medeval_metrics import registry

    spec, breakdown = registry.benchmark_of(task), registry.breakdown_for(task)
    metrics = list(breakdown.metrics) if breakdown else []
    if spec is not None:
        metrics.append(task_primary_metric(task)[1])
    return (spec.name if spec else None), tuple(dict.fromkeys(metrics))
