"""emrQA prompts and targets, as the task YAMLs name them."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def evidence_prompt(doc: Mapping[str, Any]) -> str:
    # Note first, question last: if lm-eval has to cut the prompt, it cuts the note's beginning.
    return (
        f"Clinical note:\n{doc['note']}\n\n"
        "Copy the line or lines of the clinical note above that answer the question, exactly as written, "
        "one per line.\n"
        f"Question: {doc['question']}\nEvidence:"
    )


def evidence_target(doc: Mapping[str, Any]) -> str:
    """The gold evidence lines (shown in sample logs; scoring uses all gold answers)."""
    return "\n".join(dict.fromkeys(answer["evidence"] for answer in json.loads(doc["answers_json"])))


def classification_prompt(doc: Mapping[str, Any]) -> str:
    return (
        f"Clinical note:\n{doc['note']}\n\n"
        f"Answer the question about the clinical note above with exactly one of: {'; '.join(doc['labels'])}.\n"
        f"Question: {doc['question']}\nAnswer:"
    )


def lf_prompt(doc: Mapping[str, Any]) -> str:
    return f"Question: {doc['question']}\nLogical form:"


def lf_target(doc: Mapping[str, Any]) -> str:
    return doc["logical_form"]
