"""MedicationQA's benchmark spec: source, task, breakdown, reporting and judging (see ``medeval_metrics.spec``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from medeval_metrics.medicationqa.data import SOURCE, load_rows
from medeval_metrics.spec import BenchmarkSpec, BreakdownSpec, Judging, MetricInfo, Reporting, Source, Task, doc_field

JUDGE_SCALE = (1.0, 5.0)  # the rubric's 1-5 scores


def check_source(metadata: Mapping[str, Any]) -> None:
    """The 690 rows read and validate as the task will read them (`medeval run`'s pre-flight)."""
    load_rows(dict(metadata))


SPEC = BenchmarkSpec(
    name="medicationqa",
    paper=(
        "Ben Abacha et al. 2019, Bridging the Gap Between Consumers' Medication Questions and Trusted Answers "
        "(MedInfo 2019)"
    ),
    licence=(
        "not stated in the authors' repository (abachaa/Medication_QA_MedInfo2019) or on the Hub card; "
        "answers quote MedlinePlus, DailyMed and other web sites"
    ),
    citation_key="BenAbacha:MEDINFO19",
    listing_position=2,
    sources=(
        Source(
            SOURCE,
            files=("MedInfo2019-QA-Medications.xlsx",),
            upstream="https://github.com/abachaa/Medication_QA_MedInfo2019",
            hub_split="train",
            check=check_source,
        ),  # the Hub copy holds all 690 rows as "train"; all of them are the test set
    ),
    options=("medicationqa_bertscore_model",),  # opt-in BERTScore (medicationqa.bertscore.METADATA_KEY)
    tasks=(Task("medicationqa", SOURCE.key, samples=690),),
    breakdowns={
        "medicationqa": BreakdownSpec(
            metrics=(
                "rougeL",
                "bleu",
                "judge_panel_score",
                "judge_reward",
                "judge_accuracy",
                "judge_completeness",
                "judge_clarity",
                "judge_unscored_rate",
            ),
            dimensions={"question_type": doc_field("question_type")},
        ),
    },
    reporting=Reporting(
        display_name="MedicationQA",
        task_type="question-answering",
        primary_metric="judge_panel_score",
        metrics={
            # the headline: the panel's score, its three dimensions, how many verdicts went unscored, agreement
            "judge_panel_score": MetricInfo(
                "LLM-judge panel score (1-5)", "llm_judge_panel_score", scale=JUDGE_SCALE, from_judges=True
            ),
            "judge_accuracy": MetricInfo(
                "LLM-judge accuracy (1-5)", "llm_judge_accuracy", scale=JUDGE_SCALE, from_judges=True
            ),
            "judge_completeness": MetricInfo(
                "LLM-judge completeness (1-5)", "llm_judge_completeness", scale=JUDGE_SCALE, from_judges=True
            ),
            "judge_clarity": MetricInfo(
                "LLM-judge clarity (1-5)", "llm_judge_clarity", scale=JUDGE_SCALE, from_judges=True
            ),
            "judge_unscored_rate": MetricInfo(
                "Unscored judge verdicts", "judge_unscored_rate", in_model_index=False, from_judges=True
            ),
            "judge_agreement": MetricInfo(
                "Judge agreement (Krippendorff's alpha)",
                "krippendorff_alpha",
                in_model_index=False,
                scale=(-1.0, 1.0),
                from_judges=True,
            ),
            # diagnostics: reference-overlap scores, the panel read by other frameworks' rules, bookkeeping
            "judge_reward": MetricInfo("LLM-judge reward (0-1)", "llm_judge_reward", headline=False, from_judges=True),
            "rougeL": MetricInfo("ROUGE-L", "rouge", headline=False),
            "bleu": MetricInfo("BLEU (0-100)", "bleu", scale=(0.0, 100.0), headline=False),
            # no baseline rescaling (HELM's setting): at most 1; cosine similarities can make it negative
            "bertscore_f1": MetricInfo("BERTScore F1", "bertscore", bounds=(-math.inf, 1.0), headline=False),
            "judge_panel_score_helm": MetricInfo(
                "LLM-judge panel score, HELM's rules (1-5)",
                "llm_judge_panel_score_helm",
                in_model_index=False,
                scale=JUDGE_SCALE,
                headline=False,
                from_judges=True,
            ),
            "judge_reward_medarc": MetricInfo(
                "LLM-judge reward, MedARC's rules (0-1)",
                "llm_judge_reward_medarc",
                in_model_index=False,
                headline=False,
                from_judges=True,
            ),
            "judge_id_echo_rate": MetricInfo(
                "Judge verdicts that copied the answer id",
                "judge_id_echo_rate",
                in_model_index=False,
                headline=False,
                from_judges=True,
            ),
            "judge_verdicts": MetricInfo(
                "Items at least one judge scored",
                "judge_verdicts",
                in_model_index=False,
                headline=False,
                proportion=True,
                from_judges=True,
            ),
            # one per judge, named at run time (report.judges.sample_statistics)
            "judge_success_*": MetricInfo(
                "Items judge {} scored",
                "judge_success",
                in_model_index=False,
                headline=False,
                proportion=True,
                from_judges=True,
            ),
            "judge_computed": MetricInfo("Items judged", "judge_computed", in_model_index=False, headline=False),
        },
    ),
    # RUBRIC and process_results live in the package; the task YAML's JudgeFilter names the same rubric and fields.
    judging=Judging(module="medeval_metrics.medicationqa", question_field="question", reference_field="answer"),
)
