"""How each benchmark's metrics are named and published (one small table per benchmark).

A benchmark that is not listed still reports: its metrics keep their lm-eval names and go into the
model-index under those names. Adding a benchmark is one ``BenchmarkReporting`` entry.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class MetricInfo:
    label: str  # human-readable name, used in tables and as the model-index metric name
    hub_type: str  # model-index metric type (a Hub metric id where one fits)
    in_model_index: bool = True  # diagnostics (e.g. the unparseable rate) stay out of the card metadata
    scale: tuple[float, float] = (0.0, 1.0)  # range for figures


@dataclass(frozen=True)
class BenchmarkReporting:
    display_name: str
    task_type: str  # model-index task type (a Hub task id)
    primary_metric: str  # the one metric plotted per category and compared across runs
    metrics: dict[str, MetricInfo] = field(default_factory=dict)


REPORTING: dict[str, BenchmarkReporting] = {
    "emsqa": BenchmarkReporting(
        display_name="EMSQA",
        task_type="multiple-choice",
        primary_metric="acc",
        metrics={
            "acc": MetricInfo("Exact set-match accuracy", "accuracy"),
            "f1": MetricInfo("Set F1 (per item, averaged)", "f1"),
            "unparseable": MetricInfo("Unparseable answer rate", "unparseable_rate", in_model_index=False),
        },
    ),
}

_DEFAULT = BenchmarkReporting(display_name="", task_type="question-answering", primary_metric="")


def reporting_for(benchmark: str) -> BenchmarkReporting:
    return REPORTING.get(benchmark, BenchmarkReporting(benchmark, _DEFAULT.task_type, "", {}))


def metric_info(benchmark: str, metric: str) -> MetricInfo:
    return reporting_for(benchmark).metrics.get(metric, MetricInfo(metric, metric))
