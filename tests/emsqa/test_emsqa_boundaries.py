"""EMSQA scoring edges each pinned by a direct case: an over-complete answer, a mixed valid/invalid
answer, the ``answer`` field over other lists in one reply, an item in two categories."""

from __future__ import annotations

import pytest

from medeval_metrics.breakdown import compute_breakdown, spec_for_task
from medeval_metrics.emsqa import extract_answer, score
from medeval_metrics.emsqa.extract import is_invalid_letter_answer

LETTERS = ["a", "b", "c", "d"]


@pytest.mark.parametrize(
    "predicted, gold, acc, f1",
    [
        (["a", "c"], ["a"], 0.0, 2 / 3),  # every gold letter and one more: not an exact match
        (["a", "b", "c", "d"], ["a", "c"], 0.0, 2 / 3),  # all options picked
        (["a", "c", "d"], ["a", "c"], 0.0, 0.8),
        (["c", "a"], ["a", "c"], 1.0, 1.0),  # order does not matter
    ],
)
def test_over_complete_answer_is_not_an_exact_match(predicted, gold, acc, f1):
    result = score(predicted, gold, LETTERS)
    assert result["acc"] == acc and result["f1"] == pytest.approx(f1)


@pytest.mark.parametrize(
    "predicted, invalid",
    [
        (["a", "e"], False),  # one option letter and one non-option letter: an answer, partly wrong
        (["e", "b"], False),
        (["e"], True),
        (["e", "f"], True),
        ([], False),  # the empty set is an answer, not an invalid one
        (None, False),  # no answer is unparseable, not invalid
    ],
)
def test_mixed_valid_and_invalid_letters_is_not_an_invalid_letter_answer(predicted, invalid):
    assert is_invalid_letter_answer(predicted, LETTERS) is invalid


def test_mixed_answer_keeps_its_non_option_letter_as_a_wrong_pick():
    assert score(["a", "e"], ["a"], LETTERS) == {
        "acc": 0.0,
        "f1": pytest.approx(2 / 3),
        "unparseable": 0.0,
        "invalid_letter": 0.0,
    }


@pytest.mark.parametrize(
    "reply, expected",
    [
        # a CoT reply's other lists (eliminated options, candidates) before or after the answer field
        ('{"eliminated": ["a", "b"], "answer": ["c"]}', ["c"]),
        ('{"answer": ["c"], "eliminated": ["a", "b"]}', ["c"]),
        ('Candidates: ["a", "b"]\n{"answer": ["d"]}\nRuled out: ["b"]', ["d"]),
        ('{"reasoning": "B and C fit", "considered": ["b", "c"], "answer": "B"}', ["b"]),
    ],
)
def test_answer_field_wins_over_other_lists_in_the_same_reply(reply, expected):
    assert extract_answer(reply, LETTERS) == expected


def test_an_item_in_two_subject_areas_counts_in_both():
    spec = spec_for_task("emsqa_public")
    samples = [
        {
            "doc": {"level": ["emt"], "category": ["airway", "cardiology"]},
            "filter": "flexible-extract",
            "acc": 1.0,
            "f1": 1.0,
            "unparseable": 0.0,
            "invalid_letter": 0.0,
        },
        {
            "doc": {"level": ["emt"], "category": ["airway"]},
            "filter": "flexible-extract",
            "acc": 0.0,
            "f1": 0.5,
            "unparseable": 0.0,
            "invalid_letter": 0.0,
        },
    ]
    result = compute_breakdown(samples, spec)["flexible-extract"]
    by_area = result["subject_area"]
    assert by_area["airway"]["acc"] == {"value": 0.5, "stderr": pytest.approx(0.5), "n": 2}
    assert by_area["cardiology"]["acc"] == {"value": 1.0, "stderr": None, "n": 1}
    assert result["level"]["emt"]["acc"]["n"] == 2
    assert set(result["level x subject_area"]) == {"emt x airway", "emt x cardiology"}
    assert result["level x subject_area"]["emt x cardiology"]["f1"]["value"] == 1.0


def test_the_breakdown_of_a_task_read_two_ways_puts_its_headline_reading_first():
    """lm-eval logs the YAML's first filter first (strict-match); medeval run's breakdowns lead with the headline."""
    from medeval_metrics.breakdown import breakdown_markdown, task_breakdown

    doc = {"level": ["emt"], "category": ["airway"]}
    samples = [
        {"doc": doc, "filter": "strict-match", "acc": 0.0, "requested_format": 0.0},
        {"doc": doc, "filter": "flexible-extract", "acc": 1.0, "requested_format": 0.0},
    ]
    result = task_breakdown("emsqa_public", samples)
    assert list(result) == ["flexible-extract", "strict-match"]
    assert result["strict-match"]["level"]["emt"]["acc"]["value"] == 0.0
    text = breakdown_markdown("emsqa_public", result)
    assert text.index("(filter `flexible-extract`)") < text.index("(filter `strict-match`)")
