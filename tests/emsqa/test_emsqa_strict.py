"""The strict reading (lm-eval's ``strict-match``) and how the two filters agree: replies in, letters out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from medeval_metrics.emsqa import ExtractAnswerFilter, StrictAnswerFilter, extract_answer, process_results
from medeval_metrics.emsqa.strict import read_strict

DATA = Path(__file__).parent / "data"
FOUR = ["a", "b", "c", "d"]

LIST_ROWS = [
    # (reply, letters read or None)
    ('["b"]', ["b"]),
    (' ["a", "c"]\n', ["a", "c"]),
    ('["C", "a", "c"]', ["a", "c"]),  # upper case and a repeat: the same set
    ('```json\n["b"]\n```', ["b"]),
    ('<think>A looks right, but the dose rules it out.</think>\n\n["d"]', ["d"]),
    ("[]", []),  # an explicit empty answer
    ('["a", "e"]', ["a", "e"]),  # a letter that is no option stays (a wrong pick)
    ('["a", "b", "c", "d", "e"]', ["a", "b", "c", "d", "e"]),  # five letters on four options: still a pick
    ('["a", "b", "c", "d", "e", "f"]', None),  # counting through the alphabet past the options
    ('The answer is ["b"]', None),  # prose around the list
    ('["b"]\nBecause the patient is hypotensive.', None),  # a base model running on
    ("['b']", None),  # not JSON
    ('["b"', None),
    ('["b", "see"]', None),
    ("[1]", None),
    ('[["b"]]', None),
    ('{"answer": ["b"]}', None),  # the other prompt family's format
    ("B", None),
    ("[" * 100_000 + "]" * 100_000, None),  # nesting past the interpreter's recursion limit: no crash
    ("", None),
    ("   \n", None),
]

OBJECT_ROWS = [
    ('Oxygen first, then transport.\n{"answer": ["b"]}', ["b"]),
    ('{"step_by_step_thinking": "A and D are wrong", "answer": ["b", "c"]}', ["b", "c"]),  # the authors' form
    ('{"answer": ["b"], "rejected": ["a"]}', ["b"]),
    ('Reasoning.\n{"answer": "c"}', ["c"]),  # one letter, as the authors' field allows
    ('Reasoning.\n  {\n    "answer": [\n      "b",\n      "D"\n    ]\n  }\n', ["b", "d"]),  # pretty-printed
    ('{"thinking": "the rule {x} applies", "answer": ["d"]}', ["d"]),  # braces inside a string
    ('Step 1.\n```json\n{"answer": ["a"]}\n```', ["a"]),  # the final object in a code block of its own
    ('Step 1.\n```json\n{"answer": ["a"]}\n```\nDone.', None),
    ('Step 1 ```{"answer": ["a"]}```', None),
    ('```json\n{"answer": ["a"]}\n```', ["a"]),
    ('{"answer": []}', []),
    ('Step 1.\n{"answer": ["b"]}\nHope this helps!', None),  # text after the object
    ('The final answer is {"answer": ["b"]}', None),  # not on its own line
    # the prompt's own example sentence echoed: not on its own line, and ends with a full stop
    (
        'finish with the final answer as a JSON object on its own line, e.g. {"answer": ["b"]} or {"answer": ["a", "c"]}.',
        None,
    ),
    ('Reasoning.\n{"answer": "B and C"}', None),
    ('Reasoning.\n{"final_answer": ["b"]}', None),
    ('Reasoning.\n{"answer": ["b"]', None),
    ('["b"]', None),  # the list family's format
    ('{"answer": ["a", "b", "c", "d", "e", "f", "g"]}', None),  # counting
    ("Deep.\n" + '{"a": ' * 100_000 + "1" + "}" * 100_000, None),
]


@pytest.mark.parametrize("reply, expected", LIST_ROWS)
def test_list_format(reply, expected):
    assert read_strict(reply, "list", FOUR) == expected


@pytest.mark.parametrize("reply, expected", OBJECT_ROWS)
def test_object_format(reply, expected):
    assert read_strict(reply, "object", FOUR) == expected


def test_a_reply_in_format_reads_the_same_under_both_filters_and_counts_as_in_format():
    doc = {"letters": FOUR, "gold": ["b"], "options": ["pulse", "oxygen", "aspirin", "splint"], "question": "Q?"}
    replies = ['["b"]', "The answer is B.", "I am not sure.", '["a", "b", "c", "d", "e", "f"]', "[]"]
    strict = StrictAnswerFilter(answer_format="list").apply([[r] for r in replies], [doc] * len(replies))
    flexible = ExtractAnswerFilter(answer_format="list").apply([[r] for r in replies], [doc] * len(replies))
    assert [s[0] for s in strict] == [["b"], None, None, None, []]
    assert [f[0] for f in flexible] == [["b"], ["b"], None, None, []]
    strict_scores = [process_results(doc, s) for s in strict]
    flexible_scores = [process_results(doc, f) for f in flexible]
    assert [m["requested_format"] for m in strict_scores] == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert [m["requested_format"] for m in flexible_scores] == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert [m["acc"] for m in strict_scores] == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert [m["acc"] for m in flexible_scores] == [1.0, 1.0, 0.0, 0.0, 0.0]
    assert [m["unparseable"] for m in strict_scores] == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_the_flexible_filter_takes_the_strict_reading_first():
    # the heuristic reader alone would see the explicit empty list and the letters differently in a CoT reply
    # whose final object is the answer; the flexible filter must agree with the strict one there
    doc = {"letters": FOUR, "gold": ["c"], "options": ["w", "x", "y", "z"], "question": "Q?"}
    reply = 'A is wrong and B is wrong.\n{"answer": ["c"]}'
    [[flexible]] = ExtractAnswerFilter(answer_format="object").apply([[reply]], [doc])
    [[strict]] = StrictAnswerFilter(answer_format="object").apply([[reply]], [doc])
    assert flexible == strict == ["c"]
    assert process_results(doc, [flexible])["requested_format"] == 1.0


def test_an_item_shown_the_authors_expert_rag_prompt_is_read_in_the_list_it_asks_for():
    # tasks/emsqa/_template_rag_expert_yaml: the CoT object, or with rag_prompt "authors" their ["a"] list
    settings = {"answer_format": "object", "authors_format": "list"}
    base = {"letters": FOUR, "gold": ["b"], "options": ["w", "x", "y", "z"], "question": "Q?"}
    pack = {**base, "rag_prompt": "pack", "rag_context": "Relevant documents: ..."}
    authors = {**base, "rag_prompt": "authors", "rag_context": "EMS Knowledge:\n- t: text"}
    example = {**base, "rag_prompt": "authors", "rag_context": None}  # a few-shot example: the pack's prompt
    replies = [['["b"]'], ['Thinking.\n{"answer": ["b"]}']]
    for doc, expected in ((pack, [None, ["b"]]), (authors, [["b"], None]), (example, [None, ["b"]])):
        read = StrictAnswerFilter(**settings).apply(replies, [doc, doc])
        assert [r[0] for r in read] == expected, doc["rag_prompt"]
        flexible = ExtractAnswerFilter(**settings).apply(replies, [doc, doc])
        assert [getattr(r[0], "in_format", False) for r in flexible] == [e is not None for e in expected]


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"answer_format": "json"}, "answer_format is 'json'; set it to 'list'"),
        ({"answer_format": None}, "answer_format is None"),
        ({"answer_format": "list", "regex_pattern": "x"}, "unknown setting 'regex_pattern'"),
        ({"answer_format": "object", "authors_format": "json"}, "authors_format is 'json'"),
    ],
)
@pytest.mark.parametrize("filter_class", [StrictAnswerFilter, ExtractAnswerFilter])
def test_a_mistyped_filter_setting_is_refused_by_name(filter_class, settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("'", "'")):
        filter_class(**settings)


def _corpus_rows():
    for name in ("smollm2_outputs.jsonl", "emsqa_model_outputs.jsonl", "emsqa_fresh_outputs.jsonl"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            label = row["label"] if "label" in row else row["expected"]
            letters = [chr(ord("a") + i) for i in range(len(row["choices"]))]
            yield name, row, label, letters


def test_on_every_recorded_output_a_strict_reading_is_the_labelled_answer_and_the_readers_agree():
    """Wherever a recorded real or realistic output is in a requested format, the strict reading is the grader's
    label and the heuristic reader's reading: taking the strict one first changes no flexible score."""
    read = 0
    for name, row, label, letters in _corpus_rows():
        for answer_format in ("list", "object"):
            strict = read_strict(row["output"], answer_format, letters)
            if strict is None:
                continue
            read += 1
            where = f"{name} {row['id']} ({answer_format})"
            assert label is not None and strict == sorted(set(label)), where
            assert extract_answer(row["output"], letters, row["choices"], row.get("question")) == strict, where
    assert read >= 130  # 27 SmolLM2 and 111 realistic outputs are in a requested format today
