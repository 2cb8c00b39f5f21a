"""MedicationQA judging spec: the rubric the judge panel scores answers with."""

from __future__ import annotations

from medeval_metrics.judge.rubric import Rubric

RUBRIC = Rubric(
    name="medicationqa",
    version="medicationqa-rubric-v1",
    task_instruction=(
        "You are a clinical pharmacist grading an answer to a consumer's question about a medication. "
        "Compare the answer with the reference answer written by experts; the reference is the standard "
        "for correct information, though a correct answer may be worded differently or add correct detail."
    ),
    dimensions={
        "accuracy": "is the medication information correct and consistent with the reference (1: wrong or unsafe, 5: fully correct)",
        "completeness": "does it answer every part of the question that the reference covers (1: misses the point, 5: complete)",
        "clarity": "is it clear and understandable for a lay person (1: confusing, 5: very clear)",
    },
)

