"""emrQA's benchmark spec: sources, tasks, breakdowns and reporting (see ``medeval_metrics.spec``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from medeval_metrics.emrqa.sources import CACHE_DIR_KEY, DATA_JSON, DATA_QL_CSV, SEED_KEY
from medeval_metrics.spec import BenchmarkSpec, BreakdownSpec, MetricInfo, Reporting, Source, Task, doc_field

_UPSTREAM = "n2c2 portal (https://portal.dbmi.hms.harvard.edu/) or generated with https://github.com/panushri25/emrQA"
LOGICAL_FORM = ("lf_acc", "template_acc")
QL, QA = DATA_QL_CSV.key, DATA_JSON.key


def answer_types(doc: dict[str, Any]) -> list[str]:
    """Breakdown categories of an evidence doc: the answer forms (entity types) of its gold answers.

    Evidence docs carry their gold answers as JSON; a question counts under each answer form it has.
    """
    try:
        answers = json.loads(doc.get("answers_json") or "[]")
    except (TypeError, ValueError):
        return []
    return sorted({str(answer.get("entity_type")) for answer in answers})


def check_sources(metadata: Mapping[str, Any]) -> None:
    """Both files prepared into the cache (once): the tasks then read the same folder."""
    from medeval_metrics.emrqa.prepare import ensure_prepared  # lazily: ~90 ms; `medeval list` imports every spec

    ensure_prepared(dict(metadata))


# Preparation reads both files whichever subset a task evaluates.
BOTH_FOR_QL, BOTH_FOR_QA = (DATA_JSON.key,), (DATA_QL_CSV.key,)

LOGICAL_FORM_BREAKDOWN = BreakdownSpec(metrics=LOGICAL_FORM, dimensions={"lf_template": doc_field("lf_template")})

SPEC = BenchmarkSpec(
    name="emrqa",
    paper=(
        "Pampari et al. 2018, emrQA: A Large Corpus for Question Answering on Electronic Medical Records "
        "(EMNLP 2018), arXiv:1809.00732"
    ),
    licence="n2c2 data-use agreement (no redistribution); users bring their own files",
    citation_key="pampari2018emrqa",
    listing_position=3,
    sources=(
        Source(DATA_JSON, files=("data.json",), upstream=_UPSTREAM, check=check_sources),
        Source(DATA_QL_CSV, files=("data-ql.csv",), upstream=_UPSTREAM, check=check_sources),
    ),
    options=(SEED_KEY, "emrqa_sample_size", CACHE_DIR_KEY),
    commands=("medeval_metrics.emrqa.prepare",),  # `medeval emrqa-prepare`
    # Sample counts are None: the test sets are drawn from the user's files.
    tasks=(
        *(Task(f"emrqa_{name}", QL, also_reads=BOTH_FOR_QL) for name in ("emrql_1", "emrql_2")),
        *(
            Task(f"emrqa_{name}", QA, also_reads=BOTH_FOR_QA)
            for name in ("medication", "relations", "risk", "smoking", "obesity", "evidence_window")
        ),
    ),
    groups={
        "emrqa": (
            "emrqa_emrql_1",
            "emrqa_emrql_2",
            "emrqa_medication",
            "emrqa_relations",
            "emrqa_risk",
            "emrqa_smoking",
            "emrqa_obesity",
        ),
        # The emrQL tasks' names before they took the benchmark's prefix (issue 19), kept so that users'
        # `--tasks emrql_1` still runs; lm-eval 0.4.13 has no task-name alias, so each is a one-task group.
        "emrql_1": ("emrqa_emrql_1",),
        "emrql_2": ("emrqa_emrql_2",),
    },
    breakdowns={
        "emrqa": BreakdownSpec(
            metrics=("relaxed_em", "f1", "strict_em", "acc", "unparseable", "prompt_too_long"),
            dimensions={
                "subset": doc_field("subset"),
                "lf_template": doc_field("lf_template"),
                "answer_type": answer_types,
            },
        ),
        "emrqa_emrql": LOGICAL_FORM_BREAKDOWN,
        "emrql": LOGICAL_FORM_BREAKDOWN,  # results written under the tasks' old names (emrql_1, emrql_2)
    },
    # The primary metric falls back to a task's first metric where a task does not report relaxed EM
    # (classification: acc; logical forms: lf_acc).
    reporting=Reporting(
        display_name="emrQA",
        task_type="question-answering",
        primary_metric="relaxed_em",
        metrics={
            "relaxed_em": MetricInfo("Relaxed exact match", "exact_match"),
            "strict_em": MetricInfo("Strict exact match", "exact_match_strict"),
            "f1": MetricInfo("Token F1", "f1"),
            "acc": MetricInfo("Accuracy", "accuracy", proportion=True),
            "macro_f1": MetricInfo("Macro F1", "f1", sample_stderr="medeval_metrics.emrqa.scoring:macro_f1_stderr"),
            "lf_acc": MetricInfo("Logical-form accuracy", "accuracy", proportion=True),
            "template_acc": MetricInfo("Logical-form template accuracy", "accuracy", proportion=True),
            "unparseable": MetricInfo(
                "Unparseable answer rate", "unparseable_rate", in_model_index=False, proportion=True
            ),
            "prompt_too_long": MetricInfo(
                "Prompt too long rate", "prompt_too_long_rate", in_model_index=False, headline=False, proportion=True
            ),
        },
    ),
)
