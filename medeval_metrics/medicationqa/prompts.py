"""MedicationQA prompt."""

from __future__ import annotations

from typing import Any

INSTRUCTION = (
    "Answer the following question about a medication for a patient or caregiver. Be accurate, "
    "complete and easy to understand."
)


def doc_to_text(doc: dict[str, Any]) -> str:
    return f"{INSTRUCTION}\n\nQuestion: {doc['question']}\nAnswer:"
