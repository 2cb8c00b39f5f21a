"""The fresh judge-reply table (``data/judge_replies_fresh.jsonl``): replies in the styles real judge models
write to the pack's own prompt, each with the scores a careful reader takes, or "unscored" and why.

Each row: ``id``, ``style`` (the model family whose habits it copies), ``covers`` (the rule it tests:
reasoning, second-thoughts, scale, tolerant, reasons, control), ``reply``, ``expected`` (scores, or
"unscored"), ``why`` (the reader's rationale) and, for unscored rows, ``error``: what the reason given to
the judge in the re-ask must say. The labels were written before the parser rules they test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medeval_metrics.judge.rubric import ShownObjects, answer_id
from medeval_metrics.medicationqa import RUBRIC

TABLE = Path(__file__).with_name("data") / "judge_replies_fresh.jsonl"
QUESTION = "Can I take ibuprofen every day?"
REFERENCE = "Ibuprofen OTC max 1200 mg/day; take with food; long-term use needs a doctor."
ANSWER = "Take ibuprofen with food; do not exceed 1200 mg a day without a doctor."
ROWS = [json.loads(line) for line in TABLE.read_text(encoding="utf-8").splitlines() if line.strip()]


def read(reply: str):
    messages = RUBRIC.messages(QUESTION, REFERENCE, ANSWER)
    return RUBRIC.parse(reply, ANSWER, ShownObjects.of(messages, ANSWER))


def test_the_table_is_well_formed():
    assert answer_id(ANSWER) == "24fd8e567f87"  # the id the rows' replies copy
    ids = [row["id"] for row in ROWS]
    assert len(ids) == len(set(ids)) and len(ROWS) >= 70
    for row in ROWS:
        assert set(row) == {"id", "style", "covers", "reply", "expected", "why", "error"}, row["id"]
        assert row["covers"] in {"reasoning", "second-thoughts", "scale", "tolerant", "reasons", "control"}
        assert row["expected"] == "unscored" or set(row["expected"]) == set(RUBRIC.dimensions), row["id"]
        assert (row["error"] is None) == (row["expected"] != "unscored"), row["id"]
    # every rule of issue 21 has both kinds of row: one read, one refused
    for covers in ("reasoning", "second-thoughts", "scale", "tolerant"):
        kinds = {row["expected"] == "unscored" for row in ROWS if row["covers"] == covers}
        assert kinds == {True, False}, covers


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_fresh_replies_are_read_as_a_careful_reader_does(row):
    parsed = read(row["reply"])
    if row["expected"] == "unscored":
        assert not parsed.ok, f"{row['id']} ({row['why']}): scored {parsed.scores}"
        assert row["error"] in parsed.error, f"{row['id']}: reason {parsed.error!r}"
        # the reason reaches the judge in the re-ask, word for word
        assert parsed.error in RUBRIC.reask_message(parsed.error)["content"]
    else:
        assert parsed.ok, f"{row['id']} ({row['why']}): {parsed.error}"
        assert parsed.scores == row["expected"], row["id"]
