"""How a benchmark's metrics are named and published, read from its spec (``BenchmarkSpec.reporting``).

A benchmark outside the pack still reports: its metrics keep their lm-eval names and go into the
model-index under those names. For a pack benchmark, only its listed metrics with
``in_model_index`` go into the model-index (other metrics, e.g. per-judge success rates, are
shown in the tables only).
"""

from __future__ import annotations

from medeval_metrics.spec import MetricInfo, Reporting

BenchmarkReporting = Reporting  # the name this module used before the specs held the tables

__all__ = ["BenchmarkReporting", "MetricInfo", "metric_info", "reporting_for"]

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
    return listed.metrics.get(metric, MetricInfo(metric, metric, in_model_index=False))
