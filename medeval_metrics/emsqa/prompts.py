"""EMSQA prompts: zero-/few-shot, CoT, Expert-CoT and log-likelihood variants."""

from __future__ import annotations

import json
from typing import Any

from medeval_metrics.emsqa.data import LEVEL_NAMES
from medeval_metrics.emsqa.strict import COT_INSTRUCTION, LIST_INSTRUCTION


def _options_block(doc: dict[str, Any]) -> str:
    return "\n".join(f"{letter.upper()}. {text}" for letter, text in zip(doc["letters"], doc["options"]))


def doc_to_text(doc: dict[str, Any]) -> str:
    """Zero-/few-shot prompt: the answer is a JSON list of lowercase letters (the authors' format)."""
    return f"Question: {doc['question']}\n{_options_block(doc)}\n{LIST_INSTRUCTION}\nAnswer:"


def doc_to_target(doc: dict[str, Any]) -> str:
    return json.dumps(doc["gold"])


def doc_to_text_cot(doc: dict[str, Any]) -> str:
    return f"Question: {doc['question']}\n{_options_block(doc)}\n{COT_INSTRUCTION}\n"


def expert_standpoint(doc: dict[str, Any]) -> str:
    levels = " and ".join(LEVEL_NAMES.get(level, level) for level in doc["level"]) or "EMS provider"
    areas = ", ".join(area.replace("_", " ") for area in doc["category"]) or "general EMS practice"
    return f"You are a certified {levels} answering a certification exam question on {areas}."


def doc_to_text_expert_cot(doc: dict[str, Any]) -> str:
    """Expert-CoT (the paper's method): the prompt states the certification level and subject area(s)."""
    return (
        f"{expert_standpoint(doc)} Reason from that standpoint, following the protocols and scope of "
        f"practice of that level.\n\n{doc_to_text_cot(doc)}"
    )


def doc_to_target_cot(doc: dict[str, Any]) -> str:
    return json.dumps({"answer": doc["gold"]})


def doc_to_text_mc(doc: dict[str, Any]) -> str:
    return f"Question: {doc['question']}\n{_options_block(doc)}\nAnswer:"


def doc_to_choice_mc(doc: dict[str, Any]) -> list[str]:
    return [letter.upper() for letter in doc["letters"]]


def doc_to_target_mc(doc: dict[str, Any]) -> int:
    # Few-shot examples show the first gold letter; scoring uses the full gold set (process_results_mc).
    return doc["letters"].index(doc["gold"][0])
