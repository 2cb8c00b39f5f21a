"""How each benchmark's metrics are named and published (one small table per benchmark).

A benchmark that is not listed still reports: its metrics keep their lm-eval names and go into the
model-index under those names. For a listed benchmark, only its listed metrics with
``in_model_index`` go into the model-index (other metrics, e.g. per-judge success rates, are
shown in the tables only). Adding a benchmark is one ``BenchmarkReporting`` entry.
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
            "invalid_letter": MetricInfo("Answers naming only non-option letters", "invalid_letter_rate",
                                         in_model_index=False),
        },
    ),
    # Judge scores are on a 1-5 scale.
    "medicationqa": BenchmarkReporting(
        display_name="MedicationQA",
        task_type="question-answering",
        primary_metric="judge_panel_score",
        metrics={
            "judge_panel_score": MetricInfo("LLM-judge panel score (1-5)", "llm_judge_panel_score", scale=(1.0, 5.0)),
            "judge_accuracy": MetricInfo("LLM-judge accuracy (1-5)", "llm_judge_accuracy", scale=(1.0, 5.0)),
            "judge_completeness": MetricInfo("LLM-judge completeness (1-5)", "llm_judge_completeness", scale=(1.0, 5.0)),
            "judge_clarity": MetricInfo("LLM-judge clarity (1-5)", "llm_judge_clarity", scale=(1.0, 5.0)),
            "judge_reward": MetricInfo("LLM-judge reward (0-1)", "llm_judge_reward"),
            "rougeL": MetricInfo("ROUGE-L", "rouge"),
            "bleu": MetricInfo("BLEU (0-100)", "bleu", scale=(0.0, 100.0)),
            "judge_computed": MetricInfo("Items judged", "judge_computed", in_model_index=False),
            "judge_unscored_rate": MetricInfo("Unscored judge verdicts", "judge_unscored_rate", in_model_index=False),
            "judge_agreement": MetricInfo("Judge agreement (Krippendorff's alpha)", "krippendorff_alpha",
                                          in_model_index=False, scale=(-1.0, 1.0)),
        },
    ),
    # The primary metric falls back to a task's first metric
    # where a task does not report relaxed EM (classification: acc; logical forms: lf_acc).
    "emrqa": BenchmarkReporting(
        display_name="emrQA",
        task_type="question-answering",
        primary_metric="relaxed_em",
        metrics={
            "relaxed_em": MetricInfo("Relaxed exact match", "exact_match"),
            "strict_em": MetricInfo("Strict exact match", "exact_match_strict"),
            "f1": MetricInfo("Token F1", "f1"),
            "acc": MetricInfo("Accuracy", "accuracy"),
            "macro_f1": MetricInfo("Macro F1", "f1"),
            "lf_acc": MetricInfo("Logical-form accuracy", "accuracy"),
            "template_acc": MetricInfo("Logical-form template accuracy", "accuracy"),
            "unparseable": MetricInfo("Unparseable answer rate", "unparseable_rate", in_model_index=False),
            "prompt_too_long": MetricInfo("Prompt too long rate", "prompt_too_long_rate", in_model_index=False),
        },
    ),
}

_DEFAULT = BenchmarkReporting(display_name="", task_type="question-answering", primary_metric="")


def reporting_for(benchmark: str) -> BenchmarkReporting:
    return REPORTING.get(benchmark, BenchmarkReporting(benchmark, _DEFAULT.task_type, "", {}))


def metric_info(benchmark: str, metric: str) -> MetricInfo:
    listed = REPORTING.get(benchmark)
    if listed is None:
        return MetricInfo(metric, metric)
    return listed.metrics.get(metric, MetricInfo(metric, metric, in_model_index=False))
