"""emrQA relaxed EM's position rule at its edges: 20 characters off scores, 21 does not, at either end."""

from __future__ import annotations

import pytest

from medeval_metrics.emrqa.metrics import POSITION_TOLERANCE, score_evidence

# 80 five-character cells "[000]" ... "[079]": every substring of 5+ characters occurs once, and no
# whitespace, so a span's place in the note is its slice offset.
NOTE = "".join(f"[{i:03d}]" for i in range(80))
GOLD_START, GOLD_END = 150, 250  # the gold evidence is NOTE[150:250]
GOLD = {"evidence": NOTE[GOLD_START:GOLD_END], "evidence_start": GOLD_START, "entity_type": "empty", "entities": []}


def relaxed(start: int, end: int) -> float:
    return score_evidence(NOTE[start:end], [GOLD], NOTE)["relaxed_em"]


def test_the_tolerance_is_the_papers_20_characters():
    assert POSITION_TOLERANCE == 20


@pytest.mark.parametrize(
    "start, end, expected",
    [
        (GOLD_START, GOLD_END, 1.0),
        # the start 20 characters early or late scores; 21 does not
        (GOLD_START - 20, GOLD_END, 1.0),
        (GOLD_START - 21, GOLD_END, 0.0),
        (GOLD_START + 20, GOLD_END, 1.0),
        (GOLD_START + 21, GOLD_END, 0.0),
        # the end likewise
        (GOLD_START, GOLD_END + 20, 1.0),
        (GOLD_START, GOLD_END + 21, 0.0),
        (GOLD_START, GOLD_END - 20, 1.0),
        (GOLD_START, GOLD_END - 21, 0.0),
        # both ends at the limit together still score; one of them past it does not
        (GOLD_START - 20, GOLD_END + 20, 1.0),
        (GOLD_START + 20, GOLD_END - 20, 1.0),
        (GOLD_START - 20, GOLD_END + 21, 0.0),
    ],
)
def test_position_rule_limit_is_inclusive_at_twenty(start, end, expected):
    assert NOTE.count(NOTE[start:end]) == 1
    assert relaxed(start, end) == expected
