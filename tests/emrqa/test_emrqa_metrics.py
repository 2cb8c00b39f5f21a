"""emrQA scoring, table-driven with hand-computed values."""

from __future__ import annotations

import pytest

from medeval_metrics.emrqa.metrics import (
    bootstrap_stderr,
    macro_f1,
    parse_label,
    score_evidence,
    score_logical_form,
    token_f1,
)
from medeval_metrics.emrqa.tasks import allocate

# Line starts: 0, 15, 45, 75, 105. Lines 1, 2 and 3 are all 29 characters long.
NOTE = (
    "Admission note\n"
    "Aspirin 81 mg by mouth daily.\n"
    "Metoprolol 25 mg twice a day.\n"
    "Lasix 40 mg by mouth nightly.\n"
    "Follow up in clinic."
)
ASPIRIN_LINE = "Aspirin 81 mg by mouth daily."
METOPROLOL_LINE = "Metoprolol 25 mg twice a day."
LASIX_LINE = "Lasix 40 mg by mouth nightly."


def gold(evidence: str, start: int, entity_type: str = "single", entities: tuple[str, ...] = ()) -> dict:
    return {"evidence": evidence, "evidence_start": start, "entity_type": entity_type, "entities": list(entities)}


ASPIRIN_SINGLE = gold(ASPIRIN_LINE, 15, "single", ("aspirin",))
ASPIRIN_EMPTY = gold(ASPIRIN_LINE, 15, "empty")
METOPROLOL_EMPTY = gold(METOPROLOL_LINE, 45, "empty")


def test_note_layout_is_what_the_table_assumes():
    assert NOTE.index(ASPIRIN_LINE) == 15 and NOTE.index(METOPROLOL_LINE) == 45 and NOTE.index(LASIX_LINE) == 75
    assert len(ASPIRIN_LINE) == len(METOPROLOL_LINE) == len(LASIX_LINE) == 29


@pytest.mark.parametrize(
    "output, golds, expected",
    [
        # (relaxed_em, f1, strict_em)
        pytest.param(ASPIRIN_LINE, [ASPIRIN_EMPTY], (1.0, 1.0, 1.0), id="exact-line"),
        pytest.param("  aspirin 81 MG by   mouth daily. ", [ASPIRIN_EMPTY], (1.0, 1.0, 1.0), id="case-and-space"),
        # 13 characters late at the start, same end: within 20 -> 1 although not exact.
        pytest.param("81 mg by mouth daily.", [ASPIRIN_EMPTY], (1.0, 2 * 5 / 11, 0.0), id="few-characters-off"),
        # Same length (29), 60 characters away, no entity to rescue it -> 0 (the seed's length test says 1).
        pytest.param(LASIX_LINE, [ASPIRIN_EMPTY], (0.0, 0.5, 0.0), id="right-length-wrong-place"),
        # Not in the note, but contains the gold entity -> 1 by the entity rule.
        pytest.param("the patient takes aspirin", [ASPIRIN_SINGLE], (1.0, 2 / 9, 0.0), id="entity-contained"),
        # Same text, empty (yes/no) answer: no entity rule, not in the note -> 0.
        pytest.param("the patient takes aspirin", [ASPIRIN_EMPTY], (0.0, 2 / 9, 0.0), id="empty-has-no-entity-rule"),
        # Complex answers need every entity.
        pytest.param(
            ASPIRIN_LINE,
            [gold(METOPROLOL_LINE, 45, "complex", ("aspirin", "metoprolol"))],
            (0.0, 2 / 11, 0.0),
            id="complex-one-entity-of-two",
        ),
        pytest.param(
            "aspirin and metoprolol",
            [gold(LASIX_LINE, 75, "complex", ("aspirin", "metoprolol"))],
            (1.0, 0.0, 0.0),
            id="complex-all-entities",
        ),
        # Two gold answers, one found: averaged over the gold answers.
        pytest.param(
            ASPIRIN_LINE, [ASPIRIN_EMPTY, METOPROLOL_EMPTY], (0.5, (1 + 2 / 11) / 2, 0.5), id="one-of-two-golds"
        ),
        pytest.param(
            f"{ASPIRIN_LINE}\n{METOPROLOL_LINE}",
            [ASPIRIN_EMPTY, METOPROLOL_EMPTY],
            (1.0, 1.0, 1.0),
            id="two-of-two-golds",
        ),
        # Two-line gold evidence, answered as two lines adjacent in the note.
        pytest.param(
            f"{ASPIRIN_LINE}\n{METOPROLOL_LINE}",
            [gold(f"{ASPIRIN_LINE}\n{METOPROLOL_LINE}", 15, "empty")],
            (1.0, 1.0, 1.0),
            id="multi-line-evidence",
        ),
        # Only the first 10 predicted lines count.
        pytest.param(
            "\n".join(["Follow up in clinic."] * 10 + [ASPIRIN_LINE]),
            [ASPIRIN_EMPTY],
            (0.0, 0.0, 0.0),
            id="eleventh-line-ignored",
        ),
        pytest.param(
            "\n".join(["Follow up in clinic."] * 9 + [ASPIRIN_LINE]),
            [ASPIRIN_EMPTY],
            (1.0, 1.0, 1.0),
            id="tenth-line-counts",
        ),
        pytest.param("", [ASPIRIN_SINGLE], (0.0, 0.0, 0.0), id="empty-output"),
        # Chat-style bullets and quotes around a copied line: dropped when the note lacks them.
        pytest.param(
            f'- "{ASPIRIN_LINE}"\n2. {METOPROLOL_LINE}',
            [ASPIRIN_EMPTY, METOPROLOL_EMPTY],
            (1.0, 1.0, 1.0),
            id="list-markers-and-quotes",
        ),
        # Gold evidence that could not be located in the note: position rule cannot apply.
        pytest.param(ASPIRIN_LINE, [gold(ASPIRIN_LINE, -1, "empty")], (0.0, 1.0, 1.0), id="gold-not-located"),
    ],
)
def test_score_evidence(output, golds, expected):
    scores = score_evidence(output, golds, NOTE)
    assert (scores["relaxed_em"], scores["f1"], scores["strict_em"]) == pytest.approx(expected)


def test_score_evidence_needs_a_gold_answer():
    with pytest.raises(ValueError):
        score_evidence("x", [], NOTE)


def test_position_uses_the_occurrence_nearest_the_gold():
    note = "Continue aspirin.\nOther line here.\nContinue aspirin."
    late = gold("Continue aspirin.", note.rindex("Continue"), "empty")
    assert score_evidence("Continue aspirin.", [late], note)["relaxed_em"] == 1.0


@pytest.mark.parametrize(
    "prediction, reference, expected",
    [
        ("Aspirin 81 mg by mouth daily.", "Aspirin 81 mg by mouth daily.", 1.0),
        ("Lasix 40 mg by mouth nightly.", "Aspirin 81 mg by mouth daily.", 0.5),
        # SQuAD-style counts: "cat" twice in the prediction matches once. Token sets would give 1.0.
        ("the cat the cat sat", "cat sat", 0.8),
        ("", "", 1.0),
        ("", "aspirin", 0.0),
        ("a an the", "aspirin", 0.0),
    ],
)
def test_token_f1(prediction, reference, expected):
    assert token_f1(prediction, reference) == pytest.approx(expected)


LF_TEMPLATE = "MedicationEvent (|medication|) [dosage=x]"


@pytest.mark.parametrize(
    "output, expected",
    [
        ("MedicationEvent (aspirin) [dosage=x]", (1.0, 1.0)),
        ("  MedicationEvent(aspirin)   [dosage = x]\nextra text", (1.0, 1.0)),
        ("MedicationEvent (warfarin) [dosage=x]", (0.0, 1.0)),  # right structure, wrong slot
        ("MedicationEvent (aspirin) [startdate=x]", (0.0, 0.0)),  # wrong structure
        ("ConditionEvent (aspirin)", (0.0, 0.0)),
        ("", (0.0, 0.0)),
    ],
)
def test_score_logical_form(output, expected):
    scores = score_logical_form(output, "MedicationEvent (aspirin) [dosage=x]", LF_TEMPLATE)
    assert (scores["lf_acc"], scores["template_acc"]) == expected


def test_template_with_several_slots_and_commas():
    template = "LabEvent (|test|) [date=|date|, result=x] OR ProcedureEvent (|test|) [date=|date|, result=x]"
    good = "LabEvent (INR) [date=2091-02-03, result=x] OR ProcedureEvent (INR) [date=2091-02-03, result=x]"
    assert score_logical_form(good, good, template) == {"lf_acc": 1.0, "template_acc": 1.0}
    assert score_logical_form(good.split(" OR ")[0], good, template)["template_acc"] == 0.0
    # A slot cannot swallow structure: the form said twice is not the template's structure.
    assert score_logical_form(good + " " + good, good, template)["template_acc"] == 0.0
    assert score_logical_form(good.replace("(INR) [date", "(INR) OR LabEvent (LDL) [date", 1), good, template) == {
        "lf_acc": 0.0,
        "template_acc": 0.0,
    }
    # A gold slot value with brackets: the exact form still counts as the right structure.
    odd = "MedicationEvent (insulin (NPH)) [dosage=x]"
    assert score_logical_form(odd, odd, LF_TEMPLATE) == {"lf_acc": 1.0, "template_acc": 1.0}


SMOKING = ["CURRENT SMOKER", "NON-SMOKER", "PAST SMOKER", "SMOKER", "UNKNOWN"]


@pytest.mark.parametrize(
    "output, expected",
    [
        ("NON-SMOKER", "NON-SMOKER"),  # not SMOKER inside it
        ("The patient is a current smoker.", "CURRENT SMOKER"),
        ("smoker", "SMOKER"),
        ("Past smoker, quit in 2090", "PAST SMOKER"),
        ("I cannot tell", None),
        ("", None),
    ],
)
def test_parse_label(output, expected):
    assert parse_label(output, SMOKING) == expected


def test_macro_f1_hand_computed():
    pairs = [("A", "A"), ("A", "B"), ("B", "B"), ("C", None)]
    # A: 2*1/(2+0+1) = 2/3; B: 2*1/(2+1+0) = 2/3; C: 0 -> (4/3)/3
    assert macro_f1(pairs) == pytest.approx(4 / 9)
    assert macro_f1([("A", "A"), ("B", "B")]) == 1.0


def test_bootstrap_stderr_is_seeded_and_positive():
    pairs = [("A", "A"), ("A", "B"), ("B", "B"), ("B", "A"), ("A", "A"), ("B", "B")]
    first, second = bootstrap_stderr(pairs, iterations=200), bootstrap_stderr(pairs, iterations=200)
    assert first == second and 0.05 < first < 0.5
    assert bootstrap_stderr([("A", "A")]) == 0.0


@pytest.mark.parametrize(
    "counts, size, expected",
    [
        ({"a": 10, "b": 5, "c": 1}, 4, {"a": 2, "b": 1, "c": 1}),
        ({"a": 10, "b": 5, "c": 1}, 16, {"a": 10, "b": 5, "c": 1}),
        ({"a": 10, "b": 5, "c": 1}, 0, {"a": 10, "b": 5, "c": 1}),  # 0 = the full split
        ({"a": 10, "b": 10}, 1, {"a": 1, "b": 0}),
        ({"a": 3, "b": 1}, 3, {"a": 2, "b": 1}),
    ],
)
def test_allocate(counts, size, expected):
    assert allocate(counts, size) == expected


def test_breakdown_groups_by_subset_template_and_answer_form_and_escapes_pipes():
    import json

    from medeval_metrics.breakdown import breakdown_markdown, compute_breakdown, spec_for_task

    def sample(template, types, score):
        answers = [{"evidence": "e", "evidence_start": 0, "entity_type": t, "entities": []} for t in types]
        return {
            "doc": {"subset": "medication", "lf_template": template, "answers_json": json.dumps(answers)},
            "filter": "none",
            "relaxed_em": score,
            "f1": score,
            "strict_em": score,
            "prompt_too_long": 0.0,
        }

    samples = [
        sample("MedicationEvent (|medication|)", ["single"], 1.0),
        sample("MedicationEvent (|medication|)", ["empty", "single"], 0.0),
        sample("ConditionEvent (|problem|)", ["complex"], 1.0),
    ]
    spec = spec_for_task("emrqa_medication")
    assert spec is not None and spec_for_task("emrqa_emrql_2") is not spec
    result = compute_breakdown(samples, spec)["none"]
    assert result["subset"]["medication"]["relaxed_em"]["value"] == pytest.approx(2 / 3)
    assert result["lf_template"]["MedicationEvent (|medication|)"]["relaxed_em"]["value"] == 0.5
    assert (
        result["answer_type"]["single"]["relaxed_em"]["n"] == 2
        and result["answer_type"]["empty"]["relaxed_em"]["value"] == 0.0
    )
    table = breakdown_markdown("emrqa_medication", {"none": result})
    assert "| MedicationEvent (\\|medication\\|) | 2 |" in table


@pytest.mark.parametrize(
    "text, entity, expected",
    [
        ("Metoprolol 25 mg twice a day", "5 mg", False),  # issue 10: a bare substring test said yes
        ("Metoprolol 5 mg twice a day", "5 mg", True),
        ("Coumadin 2.5 mg nightly", "5 mg", False),  # a decimal is one token
        ("serial EKGs were normal", "EKG", False),
        ("EKG: sinus rhythm", "ekg", True),  # case-insensitive
        ("take 5\n  MG daily", "5 mg", True),  # whitespace-insensitive, across a line break
        ("NON-SMOKER", "smoker", False),  # a hyphenated word is one token
        ("aspirin, 81 mg", "aspirin", True),  # punctuation after the entity is a boundary
        ("(aspirin) daily", "aspirin", True),
        ("continue aspirin.", "aspirin", True),  # a sentence's full stop is not a decimal point
        ("dose b.i.d. with food", "b.i.d.", True),  # an entity ending in punctuation
        ("insulin   glargine 10 units", "Insulin Glargine", True),
        ("metformin-xr 500 mg", "metformin", False),
        ("", "aspirin", False),
        ("aspirin", "   ", False),  # an empty entity never matches
    ],
)
def test_entity_containment_on_token_boundaries(text, entity, expected):
    from medeval_metrics.emrqa.metrics import contains_entity

    assert contains_entity(text, entity) is expected


def test_entity_rule_no_longer_credits_a_substring_of_a_number():
    # Metoprolol's line is 30 characters from the aspirin gold (no position credit); "25 mg" contains "5 mg"
    # only as a substring. Token F1 against the aspirin line: {mg} shared, P 1/5, R 1/6 -> 2/11.
    gold_5mg = gold(ASPIRIN_LINE, 15, "single", ("5 mg",))
    assert (lambda s: (s["relaxed_em"], s["f1"], s["strict_em"]))(
        score_evidence(METOPROLOL_LINE, [gold_5mg], NOTE)
    ) == pytest.approx((0.0, 2 / 11, 0.0))
    complex_gold = gold(LASIX_LINE, 75, "complex", ("aspirin", "25 mg"))
    assert score_evidence("aspirin and metoprolol 25 mg", [complex_gold], NOTE)["relaxed_em"] == 1.0
    assert score_evidence("aspirin and metoprolol 125 mg", [complex_gold], NOTE)["relaxed_em"] == 0.0


def test_linear_text_helpers_equal_the_regex_definitions():
    """normalise_lf, collapse and squad_tokens were rewritten for 1 MB worst cases (issue 15): same results."""
    import random
    import re
    import string as string_module

    from medeval_metrics.emrqa.metrics import collapse, normalise_lf, squad_tokens

    def normalise_reference(text):
        text = re.sub(r"\s+", " ", str(text)).strip()
        return re.sub(r"\s*([\[\]{}(),=<>])\s*", r"\1", text)

    def squad_reference(text):
        text = "".join(ch for ch in text.lower() if ch not in set(string_module.punctuation))
        return re.sub(r"\b(a|an|the)\b", " ", text).split()

    rng = random.Random(15)
    alphabet = list("ab ()[]{},=<>|.-'\t\n") + ["  ", "\u00a0", "\u2003", "The ", "A", "É"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 16)))
        assert normalise_lf(text) == normalise_reference(text), repr(text)
        assert collapse(text) == re.sub(r"\s+", " ", text.lower()).strip(), repr(text)
        assert squad_tokens(text) == squad_reference(text), repr(text)
    assert normalise_lf("{ LabEvent ( INR )  [ date = x ,  result = x ] }") == "{LabEvent(INR)[date=x,result=x]}"
    assert normalise_lf("{" * 1000) == "{" * 1000 and normalise_lf(" { " * 3) == "{{{"


def test_stats_bootstrap_is_the_macro_f1_bootstrap():
    """The macro-F1 bootstrap is a thin use of the generic one, with the values of the earlier code."""
    import random

    from medeval_metrics import stats

    pairs = [("A", "A"), ("A", "B"), ("B", "B"), ("B", "A"), ("A", "A"), ("B", "B"), ("C", None)]

    def reference(items, iterations, seed):  # the emrQA bootstrap as it was written before the move
        rng = random.Random(seed)
        values = []
        for _ in range(iterations):
            sample = [items[rng.randrange(len(items))] for _ in range(len(items))]
            values.append(macro_f1(sample))
        mean = sum(values) / len(values)
        return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5

    assert bootstrap_stderr(pairs, iterations=300, seed=5) == reference(pairs, 300, 5)
    assert stats.bootstrap_stderr(pairs, macro_f1, iterations=300, seed=5) == reference(pairs, 300, 5)
    assert stats.bootstrap_stderr([2.0, 2.0, 2.0], lambda xs: sum(xs) / len(xs), iterations=50) == 0.0
    assert stats.bootstrap_stderr([1.0], lambda xs: xs[0]) == 0.0
