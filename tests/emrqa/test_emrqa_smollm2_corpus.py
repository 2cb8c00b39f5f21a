"""emrQA answer reading on SmolLM2-135M-Instruct's real outputs on the synthetic notes
(tests/emrqa/data/smollm2_outputs.jsonl, from ``scripts/record_real_outputs.py``: chat template, greedy).

Labels were made by hand without looking at what the pack reads: for evidence (``emrqa_medication``) the
lines of the note the output copies (``[]``: none); for logical forms (``emrqa_emrql_1``) the logical
form it gives; for smoking status the class it commits to in meaning (null: none). Rows the pack reads
otherwise today are in ``KNOWN_DIFFERENCES`` with the reason (xfail, not strict). Run with ``-s`` for
the read share per task and the relaxed-EM credit the evidence outputs earn.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medeval_metrics.emrqa.metrics import candidates, first_line, parse_label, prediction_lines, score_evidence
from medeval_metrics.emrqa.text import note_index

CORPUS = Path(__file__).parent / "data" / "smollm2_outputs.jsonl"
ROWS = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]

NO_LABEL_NAMED = (
    "a prose answer that means a class ('quit smoking') but names no label is unparseable; "
    "no helper of issue 20 owns emrQA reading"
)
KNOWN_DIFFERENCES = {
    "emrqa_medication-chat-006": "the pack locates a fragment ('No murmurs', a part of a note line, other case) as "
    "copied evidence; read as a grader, the output copies no line of the note",
    "emrqa_smoking-chat-001": NO_LABEL_NAMED,
    "emrqa_smoking-chat-002": NO_LABEL_NAMED,
    "emrqa_smoking-chat-003": NO_LABEL_NAMED,
}


def pack_reading(row: dict):
    output = row["output"]
    if row["task"] == "emrqa_smoking":
        return parse_label(output, row["gold"]["labels"])
    if row["task"] == "emrqa_emrql_1":
        return first_line(output) or None
    near = max(row["gold"]["answers"][0].get("evidence_start", 0), 0)
    found = candidates(prediction_lines(output), note_index(row["note"]), near)
    return sorted({text for text, span in found if span is not None})


def test_every_task_kind_is_there_and_labelled():
    assert {row["task"] for row in ROWS} == {"emrqa_medication", "emrqa_emrql_1", "emrqa_smoking"}
    for row in ROWS:
        assert "label" in row and row["label_reason"].strip(), row["id"]
        if row["task"] == "emrqa_medication":
            assert all(line in row["note"] for line in row["label"]), row["id"]


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(
            row,
            id=row["id"],
            marks=[pytest.mark.xfail(reason=KNOWN_DIFFERENCES[row["id"]], strict=False)]
            if row["id"] in KNOWN_DIFFERENCES
            else [],
        )
        for row in ROWS
    ],
)
def test_the_pack_reads_the_output_as_labelled(row):
    assert pack_reading(row) == row["label"], row["label_reason"]


def test_read_share_per_task_and_no_mismatch_outside_the_known_list():
    lines, unknown = [], []
    for task in ("emrqa_medication", "emrqa_emrql_1", "emrqa_smoking"):
        rows = [row for row in ROWS if row["task"] == task]
        missed = [row["id"] for row in rows if pack_reading(row) != row["label"]]
        lines.append(f"{task} {len(rows) - len(missed)}/{len(rows)}")
        unknown += [rid for rid in missed if rid not in KNOWN_DIFFERENCES]
    evidence = [row for row in ROWS if row["task"] == "emrqa_medication"]
    credited = [
        row["id"]
        for row in evidence
        if not row["label"] and score_evidence(row["output"], row["gold"]["answers"], row["note"])["relaxed_em"] > 0
    ]
    print(
        f"\nSmolLM2 emrQA corpus read as labelled: {', '.join(lines)}. Evidence outputs that copy no note line "
        f"but earn relaxed-EM credit (they name the question's entity): {len(credited)}/{len(evidence)}"
    )
    assert not unknown, unknown
