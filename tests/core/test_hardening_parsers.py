"""Property-based tests for every function that reads model (or judge) output.

Whatever a model writes -- arbitrary unicode (lone surrogates included), control characters,
nested or truncated JSON, answer-like fragments in any order, 1 MB of it -- a parser never
raises and returns a value of its documented type. Speed on 1 MB inputs is measured by
``scripts/bench_hardening.py`` (no timing assertions here).

To cover a new parser, add one ``ParserSpec`` line to ``PARSERS``: a name, a function taking the
model output string, and a predicate for the documented return type.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from medeval_metrics import emsqa
from medeval_metrics.emrqa import metrics as emrqa_metrics
from medeval_metrics.redact import redact_text

# --- documented return types ----------------------------------------------------------------------


def letters_or_none(valid: str) -> Callable[[Any], bool]:
    """``None``, or a sorted list of distinct lower-case letters, each one of ``valid``."""

    def check(value: Any) -> bool:
        return value is None or (
            isinstance(value, list)
            and all(isinstance(x, str) and x in valid for x in value)
            and value == sorted(set(value))
        )

    return check


def is_str(value: Any) -> bool:
    return isinstance(value, str)


def emsqa_scores(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and set(value) == {"acc", "f1", "unparseable", "invalid_letter", "requested_format", "extracted_by_model"}
        and all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in value.values())
    )


_EMSQA_OPTIONS = ["aspirin", "oral glucose", "a and b", "none of the above"]
_EMSQA_DOC = {"letters": ["a", "b", "c", "d"], "gold": ["a", "c"], "options": _EMSQA_OPTIONS, "question": "which drug?"}
ALL_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def judge_verdict(value: Any) -> bool:
    """A ParsedVerdict: integer scores on the rubric's scale for every dimension, or an error."""
    from medeval_metrics.medicationqa import RUBRIC

    if value.scores is None:
        return isinstance(value.error, str) and value.error != ""
    return (
        value.error is None
        and set(value.scores) == set(RUBRIC.dimensions)
        and all(type(v) is int and RUBRIC.scale_min <= v <= RUBRIC.scale_max for v in value.scores.values())
        and all(isinstance(r, str) for r in value.reasons.values())
    )


def _parse_verdict(reply: str) -> Any:
    from medeval_metrics.medicationqa import RUBRIC

    return RUBRIC.parse(reply, "the judged answer")


def _shown_objects(answer: str) -> Any:
    from medeval_metrics.judge.rubric import ShownObjects

    shown = ShownObjects.of([{"role": "user", "content": f"Rate this answer:\n{answer}\nReply in JSON."}], answer)
    return shown.in_answer | shown.in_prompt


def unit_scores(*keys: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return (
            isinstance(value, dict)
            and set(value) == set(keys)
            and all(isinstance(v, float) and 0.0 <= v <= 1.0 for v in value.values())
        )

    return check


def evidence_lines(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) <= emrqa_metrics.MAX_PREDICTIONS
        and all(isinstance(line, str) and line and line == line.strip() for line in value)
    )


# A synthetic note (no patient data) with one gold evidence line, and an emrQA-style logical form.
_EMRQA_NOTE = "Admission date: 01/02\nMedications:\n- aspirin 81 mg daily\n- metoprolol 25 mg twice daily\n"
_EMRQA_GOLD = {
    "evidence": "aspirin 81 mg daily",
    "evidence_start": _EMRQA_NOTE.index("aspirin"),
    "entity_type": "single",
    "entities": ["aspirin"],
}
_EMRQA_TEMPLATE = "MedicationEvent (|medication|) [dosage=x]"
_EMRQA_LF = "MedicationEvent (aspirin) [dosage=x]"
_SMOKING_LABELS = ["CURRENT SMOKER", "NON-SMOKER", "PAST SMOKER", "UNKNOWN"]


@dataclass(frozen=True)
class ParserSpec:
    name: str
    parse: Callable[[str], Any]
    returns_documented_type: Callable[[Any], bool]
    guards_non_text: bool = False  # documented to accept any object (None, bytes...) as "no answer"


PARSERS = [
    # Letters that are not options are kept as wrong picks (issue 10), so any letter a-z may come back.
    ParserSpec(
        "emsqa.extract_answer/a-f", lambda s: emsqa.extract_answer(s, "abcdef"), letters_or_none(ALL_LETTERS), True
    ),
    ParserSpec(
        "emsqa.extract_answer/a-d",
        lambda s: emsqa.extract_answer(s, ["a", "b", "c", "d"]),
        letters_or_none(ALL_LETTERS),
        True,
    ),
    ParserSpec(
        "emsqa.extract_answer/options",
        lambda s: emsqa.extract_answer(s, "abcd", _EMSQA_OPTIONS, "which drug?"),
        letters_or_none(ALL_LETTERS),
        True,
    ),
    ParserSpec("emsqa.strip_reasoning", emsqa.strip_reasoning, is_str),
    ParserSpec(
        "emsqa.ExtractAnswerFilter",
        lambda s: emsqa.ExtractAnswerFilter().apply([[s]], [_EMSQA_DOC])[0][0],
        letters_or_none(ALL_LETTERS),
        True,
    ),
    ParserSpec("emsqa.process_results(raw)", lambda s: emsqa.process_results(_EMSQA_DOC, [s]), emsqa_scores),
    ParserSpec("redact.redact_text", redact_text, is_str),
    ParserSpec("judge.Rubric.parse (MedicationQA)", _parse_verdict, judge_verdict),
    # the objects a judged answer shows (forgery check): the answer is model output too
    ParserSpec("judge.ShownObjects.of (answer)", _shown_objects, lambda v: isinstance(v, frozenset)),
    ParserSpec("emrqa.prediction_lines", lambda s: emrqa_metrics.prediction_lines(s), evidence_lines),
    ParserSpec(
        "emrqa.score_evidence",
        lambda s: emrqa_metrics.score_evidence(s, [_EMRQA_GOLD], _EMRQA_NOTE),
        unit_scores("relaxed_em", "f1", "strict_em"),
    ),
    ParserSpec(
        "emrqa.score_logical_form",
        lambda s: emrqa_metrics.score_logical_form(s, _EMRQA_LF, _EMRQA_TEMPLATE),
        unit_scores("lf_acc", "template_acc"),
    ),
    ParserSpec(
        "emrqa.parse_label",
        lambda s: emrqa_metrics.parse_label(s, _SMOKING_LABELS),
        lambda v: v is None or v in _SMOKING_LABELS,
    ),
]
PARSER_IDS = [p.name for p in PARSERS]

# --- what a model might write ---------------------------------------------------------------------

# Every code point, lone surrogates included (they survive json.loads of "\ud800").
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=300)
control_text = st.text(
    st.characters(max_codepoint=0x20) | st.sampled_from("\x7f\x85\u2028\u2029\ufeff\u200b\u202e\ud800\udfff"),
    max_size=200,
)
# Pieces of answers, markup and reasoning in any order: the grammar the regexes look for.
FRAGMENTS = [
    "answer",
    "Answer:",
    "answers are",
    "The correct options are",
    "final answer",
    "option",
    "choice",
    " is ",
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    '"',
    "'",
    "`",
    ",",
    ", and ",
    " and ",
    "&",
    "/",
    "+",
    ":",
    "=",
    "-",
    ".",
    "**",
    "*",
    "\\boxed{",
    "\\text{",
    "<think>",
    "</think>",
    "<THINK>",
    '{"answer": ',
    '"final_answer": ',
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "A",
    "B",
    "C",
    "F",
    "G",
    "z",
    "Z",
    "a.",
    "(B)",
    "b)",
    '["a", "c"]',
    "[]",
    "\n",
    " ",
    "\t",
    "\x00",
    "é",
    "😀",
    "١",
    "ａ",
]
answerish = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), max_size=60).map("".join)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True)
    | any_text
    | st.sampled_from(["a", "B", "answer"]),
    lambda children: (
        st.lists(children, max_size=5)
        | st.dictionaries(
            st.sampled_from(["answer", "final_answer", "letters", "reason"]) | any_text, children, max_size=5
        )
    ),
    max_leaves=25,
)
json_text = json_values.map(lambda v: json.dumps(v, ensure_ascii=False))
# Truncated anywhere, like a reply cut off by max_gen_toks.
broken_json = st.tuples(json_text, st.floats(0, 1)).map(lambda t: t[0][: int(len(t[0]) * t[1])])
deep_json = st.tuples(
    st.integers(1, 3000), st.sampled_from(['{"answer": ', "[", '["a", ', "{", "\\boxed{"]), st.booleans()
).map(lambda t: t[1] * t[0] + ('"a"' + "]" * t[0] if t[2] else ""))
model_output = any_text | control_text | answerish | json_text | broken_json | deep_json

ONE_MB = 1_000_000


def to_one_megabyte(seed: str) -> str:
    seed = seed or "x"
    return (seed * (ONE_MB // len(seed) + 1))[:ONE_MB]


SETTINGS = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@pytest.mark.parametrize("parser", PARSERS, ids=PARSER_IDS)
@SETTINGS
@given(text=model_output)
def test_parser_never_raises_and_returns_documented_type(parser: ParserSpec, text: str) -> None:
    result = parser.parse(text)
    assert parser.returns_documented_type(result), f"{parser.name} returned {result!r}"


# The 1 MB stress tests put a megabyte through every parser about 200 times (25 s): CI runs them (e2e); the
# fast loop keeps the property test above, on the same parsers.
@pytest.mark.e2e
@pytest.mark.parametrize("parser", PARSERS, ids=PARSER_IDS)
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(seed=answerish | control_text | json_text)
def test_parser_handles_one_megabyte_outputs(parser: ParserSpec, seed: str) -> None:
    result = parser.parse(to_one_megabyte(seed))
    assert parser.returns_documented_type(result)


# Hand-picked 1 MB inputs that once took exponential or quadratic time (emsqa's regexes, the
# judge's <think> stripping and JSON scanning) or raised (RecursionError on deep nesting).
PATHOLOGICAL = [
    "**A, ",
    '["a", "b"] ',
    "answers are a, ",
    "A and ",
    "(a) ",
    '"answer": [',
    "<think>",
    "é中😀\x00",
    "{",
    '{"',
    '{"a": ',
    '{"a": 1} ',
]


@pytest.mark.e2e  # 1 MB stress, as above
@pytest.mark.parametrize("parser", PARSERS, ids=PARSER_IDS)
@pytest.mark.parametrize("seed", PATHOLOGICAL)
def test_parser_handles_pathological_repetition(parser: ParserSpec, seed: str) -> None:
    assert parser.returns_documented_type(parser.parse(to_one_megabyte(seed)))


GUARDED = [p for p in PARSERS if p.guards_non_text]


@pytest.mark.parametrize("parser", GUARDED, ids=[p.name for p in GUARDED])
@pytest.mark.parametrize("bad", [None, 42, b"B", ["B"], {"answer": "B"}])
def test_extractor_treats_non_text_as_no_answer(parser: ParserSpec, bad: Any) -> None:
    """A backend may hand over None or a non-string (e.g. from a stale cache): no answer, no crash."""
    assert parser.parse(bad) is None


# --- properties specific to the EMSQA extractor ---------------------------------------------------

_NO_THINK = re.compile(r"</?think>", re.IGNORECASE)


@SETTINGS
@given(reasoning=model_output, reply=answerish | any_text)
def test_emsqa_reasoning_block_never_changes_the_answer(reasoning: str, reply: str) -> None:
    """A closed <think> block is ignored: its contents cannot change the extracted answer."""
    reasoning, reply = _NO_THINK.sub("", reasoning), _NO_THINK.sub("", reply)
    with_block = emsqa.extract_answer(f"<think>{reasoning}</think>{reply}", "abcdef")
    assert with_block == emsqa.extract_answer(" " + reply, "abcdef")


@SETTINGS
@given(letters=st.lists(st.sampled_from("abcdef"), min_size=1, max_size=6, unique=True), noise=any_text)
def test_emsqa_a_trailing_json_answer_wins_over_earlier_text(letters: list[str], noise: str) -> None:
    """Whatever came before, a final JSON list of valid letters is the answer."""
    reply = f"{noise}\nFinal: {json.dumps(letters)}"
    assert emsqa.extract_answer(reply, "abcdef") == sorted(letters)


# --- properties specific to the judge verdict parser ----------------------------------------------


def _verdict_scores():
    from medeval_metrics.medicationqa import RUBRIC

    return st.fixed_dictionaries({d: st.integers(RUBRIC.scale_min, RUBRIC.scale_max) for d in RUBRIC.dimensions})


@SETTINGS
@given(scores=_verdict_scores(), noise=model_output)
def test_judge_a_valid_verdict_after_any_chatter_is_read(scores: dict[str, int], noise: str) -> None:
    """Preamble text of any kind (without braces or think tags, which have their own rules) never
    hides a well-formed verdict for the judged answer that ends the reply."""
    from medeval_metrics.judge.rubric import answer_id

    noise = _NO_THINK.sub("", re.sub(r"[{}]", "", noise)).replace("<", "")
    verdict = {
        "answer_id": answer_id("the judged answer"),
        **{dim: {"score": score, "reason": "because"} for dim, score in scores.items()},
    }
    parsed = _parse_verdict(f"{noise}\n{json.dumps(verdict)}")
    assert parsed.scores == scores and parsed.error is None


@pytest.mark.parametrize(
    "output, expected",
    [
        # "İ".lower() is two characters: positions taken from lower() once cut the answer off
        ("İİİİİİİİİİİİ</think>B", ["b"]),
        ("İ reasoning </THINK> The answer is (C)", ["c"]),
        ("draft: A </think> final </think> D", ["d"]),
    ],
)
def test_emsqa_text_after_a_stray_closing_think_tag(output: str, expected: list[str]) -> None:
    assert emsqa.extract_answer(output, "abcd") == expected
