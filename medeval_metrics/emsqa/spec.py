"""EMSQA's benchmark spec: sources, tasks, breakdowns and reporting (see ``medeval_metrics.spec``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError
from medeval_metrics.emsqa import data
from medeval_metrics.emsqa.data import PRIVATE_SOURCE, PUBLIC_SOURCE
from medeval_metrics.emsqa.knowledge import KNOWLEDGE_FILES, KNOWLEDGE_SOURCE, RAG_OPTIONS, RAG_REMOVED
from medeval_metrics.settings import refuse_removed
from medeval_metrics.spec import (
    BenchmarkSpec,
    BreakdownSpec,
    MetricInfo,
    Reading,
    Reporting,
    Source,
    Task,
    crossed,
    doc_field,
)

PUBLIC, PRIVATE, KNOWLEDGE = PUBLIC_SOURCE.key, PRIVATE_SOURCE.key, KNOWLEDGE_SOURCE.key
PUBLIC_SAMPLES = 3721  # test_open.json

_level, _area = doc_field("level"), doc_field("category")


def check_public(metadata: Mapping[str, Any]) -> None:
    """The public test set resolves and reads as the tasks will read it (`medeval run`'s pre-flight)."""
    test, _ = data._public_files(dict(metadata))
    data.load_docs(test, "the EMSQA public test set", allow_duplicates=data.allow_duplicates(dict(metadata)))


def check_private(metadata: Mapping[str, Any]) -> None:
    """The private set is given, is a file, and reads in the public schema."""
    path = PRIVATE_SOURCE.local_path(dict(metadata))
    if path is None:
        raise PRIVATE_SOURCE.missing("no file was given")
    if path.is_dir():
        raise MedevalDataError(f"{path} is a folder; {PRIVATE_SOURCE.key} must name the private set's file.")
    data.load_docs(path, "the EMSQA private set", allow_duplicates=data.allow_duplicates(dict(metadata)))


def check_knowledge(metadata: Mapping[str, Any]) -> None:
    """The knowledge base resolves (a folder holding the subject files, or the Hub copy) and the RAG settings
    read as the loader reads them (its own validators), every problem at once: the RAG tasks' pre-run check."""
    # lazily: retrieval (numpy, bm25s) costs ~0.6 s, and `medeval list` imports every spec
    from medeval_metrics.emsqa import rag

    refuse_removed(metadata, RAG_REMOVED)
    metadata = dict(metadata)
    problems: list[str] = []
    for check in (rag.knowledge_files, rag.retrieval_settings, rag.prompt_style, rag.check_writable_settings):
        try:
            check(metadata)
        except MedevalDataError as exc:
            problems.append(str(exc))
    problems += _rag_file_problems(metadata)
    if not problems:  # an external retriever's file made on another knowledge base: refused before the model loads
        problems += rag.retrievals_file_problems(metadata)
    if problems:
        error = MedevalDataError(problems[0])
        error.problems = problems  # type: ignore[attr-defined]  (read by the pre-run checks: one line each)
        raise error


def _rag_file_problems(metadata: Mapping[str, Any]) -> list[str]:
    """rag_retrievals and rag_areas (unless "gold") name files that exist: the loader reads them only once the
    model is loaded."""
    from medeval_metrics.settings import setting

    problems = []
    for key, what, fix in (
        ("rag_retrievals", "the retrievals a run saved (rag_save_retrievals)", "leave rag_retrievals out to retrieve"),
        ("rag_areas", "the predicted areas per item", 'leave rag_areas out (or "gold") for the items\' own areas'),
    ):
        value = setting(metadata, key)
        if value is None or (key == "rag_areas" and str(value).strip() == "gold"):
            continue
        path = Path(str(value)).expanduser()
        if not path.is_file():
            state = "a folder" if path.is_dir() else "not there"
            problems.append(f"{key} points at {path}, which is {state}: give the file of {what}, or {fix}.")
    return problems


SPEC = BenchmarkSpec(
    name="emsqa",
    paper=(
        "Ge et al. 2026, Expert-Guided Prompting and Retrieval-Augmented Generation for Emergency Medical "
        "Service Question Answering (AAAI 2026), arXiv:2511.10900"
    ),
    licence="MIT (dataset card of Xueren/EMS-MCQA); private set: the user's own licence",
    citation_key="ge2026emsqa",
    listing_position=1,
    sources=(
        Source(
            PUBLIC_SOURCE,
            files=("test_open.json", "val_open.json"),
            upstream="https://github.com/UVA-DSA/EMSQA (data/final/)",
            check=check_public,
        ),
        Source(
            PRIVATE_SOURCE,
            files=("the user's private file in the public schema",),
            upstream="not released; users bring their copy",
            check=check_private,
        ),
        Source(
            KNOWLEDGE_SOURCE,
            files=tuple(f"{stem}.json" for stem in KNOWLEDGE_FILES),
            upstream="https://github.com/UVA-DSA/EMSQA (knowledge/)",
            check=check_knowledge,
        ),
    ),
    options=("emsqa_revision", "emsqa_allow_duplicates", "emsqa_extraction_model", *RAG_OPTIONS),
    flag_options=("emsqa_allow_duplicates",),
    removed_options=RAG_REMOVED,
    key_prefixes=("rag_",),
    commands=("medeval_metrics.emsqa.cli",),  # `medeval emsqa-retrievals-header`
    tasks=(
        *(Task(f"emsqa_public{v}", PUBLIC, samples=PUBLIC_SAMPLES) for v in ("", "_cot", "_expert_cot", "_mc")),
        *(Task(f"emsqa_private{v}", PRIVATE) for v in ("", "_cot", "_expert_cot", "_mc")),
        # retrieval from the knowledge base (the paper's Table 4 settings)
        *(
            Task(f"emsqa_{split}_{variant}", source, samples=samples, also_reads=(KNOWLEDGE,))
            for split, source, samples in (("public", PUBLIC, PUBLIC_SAMPLES), ("private", PRIVATE, None))
            for variant in ("rag", "rag_expert_cot", "expertrag_ftr", "expertrag_rtf")
        ),
    ),
    groups={
        "emsqa_public_variants": ("emsqa_public", "emsqa_public_cot", "emsqa_public_expert_cot", "emsqa_public_mc"),
        "emsqa": ("emsqa_public_variants", "emsqa_private_variants"),
        "emsqa_private_variants": (
            "emsqa_private",
            "emsqa_private_cot",
            "emsqa_private_expert_cot",
            "emsqa_private_mc",
        ),
        "emsqa_rag": tuple(
            f"emsqa_{split}_{variant}"
            for split in ("public", "private")
            for variant in ("rag", "rag_expert_cot", "expertrag_ftr", "expertrag_rtf")
        ),
    },
    breakdowns={
        "emsqa": BreakdownSpec(
            metrics=("acc", "f1", "unparseable", "requested_format", "invalid_letter", "extracted_by_model"),
            dimensions={"level": _level, "subject_area": _area, "level x subject_area": crossed(_level, _area)},
        ),
    },
    reporting=Reporting(
        display_name="EMSQA",
        task_type="multiple-choice",
        primary_metric="acc",
        # the generative tasks' two lm-eval filters (tasks/emsqa/README.md, "Two readings")
        readings=(
            Reading(
                "flexible-extract",
                "the pack's reader",
                "a reply in the requested format as strict-match reads it; any other by the pack's answer rules",
                headline=True,
                former_filters=("extract_answer",),
            ),
            Reading(
                "strict-match",
                "requested format only",
                "only a reply in the requested JSON format (lm-eval's strict-match, as gsm8k's); anything else is"
                " unparseable",
            ),
        ),
        reading_metrics=("acc", "f1", "unparseable"),
        task_settings="medeval_metrics.emsqa.report_settings:task_settings",  # how a RAG task retrieved
        metrics={
            "acc": MetricInfo("Exact set-match accuracy", "accuracy", proportion=True),
            "f1": MetricInfo("Set F1 (per item, averaged)", "f1"),
            "unparseable": MetricInfo("Unparseable answer rate", "unparseable_rate", proportion=True),
            "requested_format": MetricInfo(
                "Replies in the requested format", "requested_format_rate", proportion=True, across_readings=True
            ),
            "invalid_letter": MetricInfo(
                "Answers naming only non-option letters",
                "invalid_letter_rate",
                in_model_index=False,
                headline=False,
                proportion=True,
            ),
            "extracted_by_model": MetricInfo(
                "Answers read by the opt-in extraction model",
                "extracted_by_model_rate",
                in_model_index=False,
                headline=False,
                proportion=True,
            ),
            "retrieved_own_area": MetricInfo(
                "Retrieved chunks from the item's own subject areas",
                "retrieved_own_area",
                in_model_index=False,
                headline=False,
                across_readings=True,  # from the prompt, not the reading
            ),
            # rag_k has no upper limit: the figures' axis stops at 32, the accepted range does not
            "retrieved_documents": MetricInfo(
                "Documents retrieved per item",
                "retrieved_documents",
                in_model_index=False,
                scale=(0.0, 32.0),
                bounds=(0.0, math.inf),
                headline=False,
                across_readings=True,  # from the prompt, not the reading
            ),
            "no_documents": MetricInfo(
                "Items shown no retrieved document",
                "no_documents_rate",
                in_model_index=False,
                headline=False,
                proportion=True,
                across_readings=True,  # from the prompt, not the reading
            ),
            "prompt_too_long": MetricInfo(
                "Prompts longer than the model's context",
                "prompt_too_long_rate",
                in_model_index=False,
                headline=False,
                proportion=True,
                across_readings=True,  # from the prompt, not the reading
            ),
        },
    ),
)
