"""MedicationQA scoring on SmolLM2-135M-Instruct's real answers (tests/medicationqa/data/smollm2_outputs.jsonl,
from ``scripts/record_real_outputs.py``: chat template, greedy, 128 new tokens, the pack's ``medeval run``).

Each row carries a hand label: ``answer`` (an attempt a grader would score, with a note on its content) or
``no answer``. The pack scores every answer as written: the text ROUGE-L and the judges see is the output
itself (stripped), and ROUGE-L recomputed from it equals the value the run logged (two wrong one-line
answers share no word with the expert answer: 0).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medeval_metrics.medicationqa.scoring import process_results, rouge_l

CORPUS = Path(__file__).parent / "data" / "smollm2_outputs.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_every_row_is_labelled():
    assert len(ROWS) >= 10
    for row in ROWS:
        assert row["label"] in ("answer", "no answer") and row["label_reason"].strip(), row["id"]


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_rouge_l_of_the_real_answer_is_what_the_run_logged(row):
    doc = {"answer": row["reference"]}
    scored = process_results(doc, [{"answer": row["output"], "verdicts": None, "judges": None}])
    assert (
        scored["rougeL"]
        == pytest.approx(row["rougeL"])
        == pytest.approx(rouge_l(row["output"].strip(), row["reference"]))
    )
