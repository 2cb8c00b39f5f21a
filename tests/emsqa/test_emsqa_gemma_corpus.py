"""The EMSQA reader on Gemma-3-270M's real outputs (tests/emsqa/data/gemma3_outputs.jsonl).

Gemma-3-270M is a base model (its GGUF carries no chat template), so it meets the prompts as plain text
and writes what a base model writes: it restates the prompt block, restarts it until the token budget
cuts it, counts through the alphabet, cycles through answers. Each row is one real output
(``scripts/record_real_outputs.py --model gemma3-270m``: greedy, CPU, one thread, ``max_gen_toks`` 128,
the pack's own ``medeval run``) on one of 24 public test items drawn with a fixed seed past the first 400
(no earlier corpus or reference run holds them), for zero-shot, CoT and Expert-CoT, and on the first 12 of
them for 3-shot. Every row
was labelled by hand, blind (before the pack's reader was run on it): ``label`` is the sorted option
letters the output commits to, or null where it commits to none; ``ambiguous`` (where present) says why a
grader could read it otherwise; ``label_reason`` is one line.

Rows the flexible reader (``extract_answer``) misreads today are listed in ``EXPECTED_FIXES`` with how
(not-strict xfails: the reader work of issue 31 turns them into passes); any other mismatch fails. Run
with ``-s`` to see the share read as labelled, the silent wrong answers (the reader gives letters the
label does not) and the cautious misses (no answer read where the label has one).
"""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest
from conftest import labelled_rows
from test_emsqa_smollm2_corpus import load_rows  # the same row format

from medeval_metrics.emsqa import extract_answer

CORPUS = Path(__file__).parent / "data" / "gemma3_outputs.jsonl"
EARLIER = Path(__file__).parent / "data" / "smollm2_outputs.jsonl"
VARIANTS = ("zero_shot", "fewshot_3", "cot", "expert_cot")
FIRST_UNUSED_ITEM = 400  # the reference results run the first 400 public test items (log-likelihood)

# id -> how the flexible reader misreads the row today. Listed rows are xfail (not strict); a mismatch not
# listed fails.
EXPECTED_FIXES: dict[str, str] = {}  # cot-plain-2594 (read a, c) is read as labelled since the reader of issue 31


ROWS = load_rows(CORPUS)


def pack_reading(row: dict) -> list[str] | None:
    doc = row["doc"]
    answer = extract_answer(row["output"], doc["letters"], doc["options"], doc["question"])
    return None if answer is None else sorted(answer)


def mismatch_kind(got: list[str] | None, label: list[str] | None) -> str:
    """A silent wrong answer (letters read that the label does not hold) is worse than a cautious miss."""
    if got is None:
        return "cautious miss"
    return "silent wrong answer" if label is not None else "silent wrong answer (no commitment read as one)"


def read_share(rows: list[dict]) -> tuple[str, list[str], collections.Counter]:
    """The share read as labelled per variant, the count of each kind of mismatch, one line per mismatch."""
    tally: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    kinds: collections.Counter = collections.Counter()
    mismatches = []
    sure = right_sure = 0
    for row in rows:
        got = pack_reading(row)
        tally[row["variant"]][0] += got == row["label"]
        tally[row["variant"]][1] += 1
        if "ambiguous" not in row:
            sure += 1
            right_sure += got == row["label"]
        if got != row["label"]:
            kind = mismatch_kind(got, row["label"])
            kinds[kind.split(" (")[0]] += 1
            mismatches.append(f"{row['id']}: label {row['label']}, pack {got} ({kind}); {row['label_reason']}")
    right = sum(v[0] for v in tally.values())
    parts = ", ".join(f"{k} {ok}/{n}" for k, (ok, n) in sorted(tally.items()))
    summary = (
        f"Gemma-3-270M EMSQA corpus: {right}/{len(rows)} read as labelled ({right / max(1, len(rows)):.0%}); "
        f"rows a grader is sure of: {right_sure}/{sure}; {parts}; silent wrong answers "
        f"{kinds['silent wrong answer']}, cautious misses {kinds['cautious miss']}"
    )
    return summary, mismatches, kinds


def test_corpus_covers_the_variants_on_one_fixed_sample_no_earlier_set_used():
    assert not any(row["chat_template"] for row in ROWS)  # the GGUF's tokenizer has no chat template
    items = {row["doc_id"] for row in ROWS}
    per_variant = {v: sorted(row["doc_id"] for row in ROWS if row["variant"] == v) for v in VARIANTS}
    first = per_variant["fewshot_3"]  # 3-shot on the first 12 drawn (its outputs are all one JSON list)
    assert len(first) == 12 and all(per_variant[v] == sorted(items) for v in VARIANTS if v != "fewshot_3")
    assert len(items) == 24 and set(first) < items
    earlier = {json.loads(line)["doc_id"] for line in EARLIER.read_text(encoding="utf-8").splitlines() if line}
    assert min(items) >= FIRST_UNUSED_ITEM and not items & earlier
    assert all(row["model"] == "gemma3-270m" and row["generation"]["do_sample"] is False for row in ROWS)
    assert len({row["id"] for row in ROWS}) == len(ROWS)


def test_every_row_is_labelled_with_letters_of_its_item_or_null_and_a_reason():
    assert all("label" in row for row in ROWS), [row["id"] for row in ROWS if "label" not in row][:10]
    for row in ROWS:
        assert row["label"] is None or (
            row["label"] == sorted(set(row["label"])) and set(row["label"]) <= set(row["doc"]["letters"])
        ), row["id"]
        assert row["label_reason"].strip() and "\n" not in row["label_reason"], row["id"]
        assert "ambiguous" not in row or row["ambiguous"].strip(), row["id"]
    assert set(EXPECTED_FIXES) <= {row["id"] for row in ROWS}


@pytest.mark.parametrize("row", labelled_rows(ROWS, EXPECTED_FIXES, "flexible reader"))
def test_the_pack_reads_the_output_as_labelled(row):
    assert pack_reading(row) == row["label"], row["label_reason"]


def test_read_share_and_no_mismatch_outside_the_known_list():
    summary, mismatches, _ = read_share(ROWS)
    print("\n" + summary + "".join(f"\n  {line}" for line in mismatches))
    unknown = [line for line in mismatches if line.split(":", 1)[0] not in EXPECTED_FIXES]
    assert not unknown, "new mismatches:\n" + "\n".join(unknown)


def test_mismatches_are_counted_by_kind():
    assert mismatch_kind(["a"], ["b"]) == "silent wrong answer"
    assert mismatch_kind(["a"], None).startswith("silent wrong answer")
    assert mismatch_kind(None, ["b"]) == "cautious miss"
