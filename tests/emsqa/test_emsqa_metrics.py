"""EMSQA set metrics against the paper's definitions, hand-computed."""

import pytest

from medeval_metrics.emsqa import process_results, process_results_mc, score, set_f1


@pytest.mark.parametrize(
    "predicted, gold, expected",
    [
        (["a"], ["a"], 1.0),
        (["b"], ["a"], 0.0),
        ([], [], 1.0),  # both empty
        ([], ["a"], 0.0),  # one empty
        (["a"], [], 0.0),
        (["a", "b"], ["a"], 2 / 3),  # P=1/2, R=1 -> 2PR/(P+R) = 2/3
        (["a"], ["a", "b", "c"], 0.5),  # P=1, R=1/3 -> 0.5
        (["a", "d"], ["a", "b", "c"], 0.4),  # P=1/2, R=1/3 -> 0.4
        (["a", "b", "c"], ["a", "b", "c"], 1.0),
    ],
)
def test_set_f1(predicted, gold, expected):
    assert set_f1(predicted, gold) == pytest.approx(expected)


@pytest.mark.parametrize(
    "predicted, gold, expected",
    [
        (["a", "c"], ["a", "c"], {"acc": 1.0, "f1": 1.0, "unparseable": 0.0}),
        (["a"], ["a", "c"], {"acc": 0.0, "f1": pytest.approx(2 / 3), "unparseable": 0.0}),
        ([], ["a"], {"acc": 0.0, "f1": 0.0, "unparseable": 0.0}),
        (None, ["a"], {"acc": 0.0, "f1": 0.0, "unparseable": 1.0}),
    ],
)
def test_score(predicted, gold, expected):
    assert score(predicted, gold) == expected


def test_process_results_parses_a_raw_string_too():
    doc = {"letters": ["a", "b", "c", "d"], "gold": ["b", "d"]}
    expected = {
        "acc": 1.0,
        "f1": 1.0,
        "unparseable": 0.0,
        "invalid_letter": 0.0,
        "requested_format": 0.0,
        "extracted_by_model": 0.0,
    }
    assert process_results(doc, [["b", "d"]]) == expected
    assert process_results(doc, ["The answer is B and D"]) == expected
    assert process_results(doc, [None])["unparseable"] == 1.0
    # a raw reply in either requested format counts as in format
    assert process_results(doc, ['["d", "b"]']) == {**expected, "requested_format": 1.0}
    assert process_results(doc, ['Both fit.\n{"answer": ["b", "d"]}']) == {**expected, "requested_format": 1.0}


def test_an_answer_read_by_the_extraction_model_is_scored_and_counted():
    from medeval_metrics.emsqa.fallback import ModelRead

    doc = {"letters": ["a", "b", "c", "d"], "gold": ["b", "d"]}
    assert process_results(doc, [ModelRead(["b"])]) == {
        "acc": 0.0,
        "f1": pytest.approx(2 / 3),
        "unparseable": 0.0,
        "invalid_letter": 0.0,
        "requested_format": 0.0,
        "extracted_by_model": 1.0,
    }


def test_multiple_choice_takes_the_single_most_likely_option():
    doc = {"letters": ["a", "b", "c", "d"], "gold": ["a", "c"]}
    # c is most likely: in the gold set but the set is incomplete -> acc 0, F1 = 2/3.
    result = process_results_mc(doc, [(-2.0, False), (-3.0, False), (-0.5, True), (-4.0, False)])
    assert result == {"acc": 0.0, "f1": pytest.approx(2 / 3)}
    single = {"letters": ["a", "b"], "gold": ["b"]}
    assert process_results_mc(single, [(-2.0, False), (-1.0, True)]) == {"acc": 1.0, "f1": 1.0}


@pytest.mark.parametrize(
    "output, expected",
    [
        # The authors' benchmark_LLM.py compares the parsed list with the gold set as it is: a letter
        # that is not an option is a wrong pick (a false positive in F1), never silently dropped.
        (
            '["a", "e"]',
            {
                "acc": 0.0,
                "f1": pytest.approx(2 / 3),
                "unparseable": 0.0,
                "invalid_letter": 0.0,
                "requested_format": 1.0,
            },
        ),
        ('["e"]', {"acc": 0.0, "f1": 0.0, "unparseable": 0.0, "invalid_letter": 1.0, "requested_format": 1.0}),
        (
            "The answer is G.",
            {"acc": 0.0, "f1": 0.0, "unparseable": 0.0, "invalid_letter": 1.0, "requested_format": 0.0},
        ),
        ('["e", "f"]', {"acc": 0.0, "f1": 0.0, "unparseable": 0.0, "invalid_letter": 1.0, "requested_format": 1.0}),
        ("I cannot tell.", {"acc": 0.0, "f1": 0.0, "unparseable": 1.0, "invalid_letter": 0.0, "requested_format": 0.0}),
        ("[]", {"acc": 0.0, "f1": 0.0, "unparseable": 0.0, "invalid_letter": 0.0, "requested_format": 1.0}),
        ('["a"]', {"acc": 1.0, "f1": 1.0, "unparseable": 0.0, "invalid_letter": 0.0, "requested_format": 1.0}),
    ],
)
def test_invalid_letters_score_as_the_authors_score_them(output, expected):
    doc = {"letters": ["a", "b", "c", "d"], "gold": ["a"]}
    assert process_results(doc, [output]) == {**expected, "extracted_by_model": 0.0}


def test_invalid_letter_rate_needs_the_items_letters():
    assert "invalid_letter" not in score(["e"], ["a"])
    assert score(["e"], ["a"], ["a", "b"])["invalid_letter"] == 1.0
    assert score(None, ["a"], ["a", "b"]) == {"acc": 0.0, "f1": 0.0, "unparseable": 1.0, "invalid_letter": 0.0}
