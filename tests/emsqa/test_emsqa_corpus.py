"""The EMSQA extractor on a corpus of realistic model outputs (tests/emsqa/data/emsqa_model_outputs.jsonl).

Each line is one output written for the project in the style of a model family (Llama-3, Qwen2.5,
Qwen3 and DeepSeek-R1 thinking, GPT-4o, Mistral, Gemma, base models running on into the next
question, models ignoring the format), for one prompt variant, with the letters a careful reader
takes from it (``null``: the output commits to no answer). Cases whose reading is a judgement call
carry an ``ambiguous`` reason; they are pinned to the rule's reading like the rest.

Run with ``-s`` to see the share read correctly, by style.
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from medeval_metrics.emsqa import extract_answer, normalise_record

CORPUS = Path(__file__).parent / "data" / "emsqa_model_outputs.jsonl"


def load_corpus(path: Path = CORPUS) -> list[dict]:
    cases = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            case = json.loads(line)
            case["doc"] = normalise_record(
                {"question": case["question"], "choices": case["choices"], "answer": "a"}, number, path
            )
            cases.append(case)
    return cases


CASES = load_corpus()


def read(case: dict) -> list[str] | None:
    doc = case["doc"]
    return extract_answer(case["output"], doc["letters"], doc["options"], doc["question"])


def corpus_summary(cases: list[dict]) -> str:
    by_style: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    silent = 0  # read as a different answer (not as "no answer"): the worst failure, counted apart
    for case in cases:
        got = read(case)
        by_style[case["style"]][0] += got == case["expected"]
        by_style[case["style"]][1] += 1
        silent += got is not None and got != case["expected"]
    right = sum(v[0] for v in by_style.values())
    ambiguous = sum(1 for c in cases if c.get("ambiguous"))
    parts = ", ".join(f"{style} {ok}/{n}" for style, (ok, n) in sorted(by_style.items()))
    return (
        f"EMSQA extraction corpus: {right}/{len(cases)} read correctly ({right / len(cases):.1%}; "
        f"{ambiguous} marked ambiguous; {silent} silent changes of answer). By style: {parts}"
    )


def test_corpus_is_large_and_varied():
    assert len(CASES) >= 300
    styles = {c["style"] for c in CASES}
    assert {
        "llama3",
        "qwen2.5",
        "qwen3",
        "deepseek-r1",
        "gpt-4o",
        "mistral",
        "gemma",
        "base-fewshot",
        "format-ignoring",
        "issue10",
    } <= styles
    assert {c["variant"] for c in CASES} >= {"zero_shot", "few_shot", "cot", "expert_cot"}
    assert sum(1 for c in CASES if c["expected"] and len(c["expected"]) > 1) >= 30  # multi-answer readings
    assert sum(1 for c in CASES if c["expected"] is None) >= 20  # outputs that give no answer
    assert all(c["ambiguous"].strip() for c in CASES if "ambiguous" in c)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_corpus_output_is_read_as_a_careful_reader_reads_it(case):
    assert read(case) == case["expected"], case["output"]


def test_corpus_share_read_correctly():
    summary = corpus_summary(CASES)
    print("\n" + summary)
    assert summary.startswith(f"EMSQA extraction corpus: {len(CASES)}/{len(CASES)} ")
