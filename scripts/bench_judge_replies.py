"""Judge replies read as a careful reader does: the share of the fresh reply table and of the older tables.

The fresh table (``tests/core/data/judge_replies_fresh.jsonl``) holds replies in the styles real
judge models write to the pack's prompt, each labelled with the scores a careful reader takes or
"unscored" and what the reason must say. A row is read right when the scores match, or when it is
unscored and the reason says what the label says; "scores right" ignores the reason. The older
corpus is the parametrised parser tables of ``tests/core/test_judge_parse.py`` (replies in, scores or
reason out). Per-rule counts show where the misses are.
Environment knob: BENCH_JUDGE_TABLE (another table of the same shape, e.g. a real judge's replies).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTION = "Can I take ibuprofen every day?"
REFERENCE = "Ibuprofen OTC max 1200 mg/day; take with food; long-term use needs a doctor."
ANSWER = "Take ibuprofen with food; do not exceed 1200 mg a day without a doctor."


def _fresh_rows() -> list[dict]:
    table = Path(os.environ.get("BENCH_JUDGE_TABLE", ROOT / "tests" / "core" / "data" / "judge_replies_fresh.jsonl"))
    return [json.loads(line) for line in table.read_text(encoding="utf-8").splitlines() if line.strip()]


def _old_rows() -> list[tuple[str, object, object]]:
    """(reply, expected scores or None, expected reason or None) from the parser tables of the older tests."""
    sys.path.insert(0, str(ROOT / "tests"))
    spec = importlib.util.spec_from_file_location("judge_parse_tables", ROOT / "tests" / "core" / "test_judge_parse.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    rows = []
    for name in (
        "test_valid_verdicts",
        "test_judge_deviations_that_are_read",
        "test_unusable_verdicts_say_why",
        "test_judge_deviations_that_are_refused_say_why",
    ):
        for mark in getattr(getattr(module, name), "pytestmark", []):
            if mark.name != "parametrize":
                continue
            for reply, expected in mark.args[1]:
                if name == "test_judge_deviations_that_are_read":
                    rows.append((reply, module.SCORES, None))
                elif isinstance(expected, dict):
                    rows.append((reply, expected, None))
                else:
                    rows.append((reply, None, expected))
    return rows


def run() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from medeval_metrics.judge.rubric import ShownObjects
    from medeval_metrics.medicationqa import RUBRIC

    shown = ShownObjects.of(RUBRIC.messages(QUESTION, REFERENCE, ANSWER), ANSWER)
    rows = _fresh_rows()
    right, scores_right, by_rule, misses = 0, 0, Counter(), []
    start = time.perf_counter()
    for row in rows:
        parsed = RUBRIC.parse(row["reply"], ANSWER, shown)
        if row["expected"] == "unscored":
            score_ok = not parsed.ok
            ok = score_ok and row["error"] in (parsed.error or "")
        else:
            score_ok = ok = parsed.ok and parsed.scores == row["expected"]
        right += ok
        scores_right += score_ok
        by_rule[(row["covers"], ok)] += 1
        if not ok:
            misses.append(row["id"])
    elapsed = time.perf_counter() - start
    share = f"fresh table: {right}/{len(rows)} replies read as a careful reader does ({right / len(rows):.0%}); "
    share += f"scores right (reason aside) {scores_right}/{len(rows)}; {elapsed / len(rows) * 1e3:.2f} ms per reply"
    lines = [share]
    rules = sorted({rule for rule, _ in by_rule})
    lines.append(
        "  by rule: "
        + ", ".join(
            f"{rule} {by_rule[(rule, True)]}/{by_rule[(rule, True)] + by_rule[(rule, False)]}" for rule in rules
        )
    )
    if misses:
        lines.append("  misses: " + ", ".join(misses))
    old = _old_rows()
    old_right = 0
    for reply, expected, reason in old:
        parsed = RUBRIC.parse(reply, ANSWER)
        old_right += (
            (parsed.ok and parsed.scores == expected)
            if expected is not None
            else (not parsed.ok and reason in (parsed.error or ""))
        )
    lines.append(
        f"older parser tables (tests/core/test_judge_parse.py): {old_right}/{len(old)} read as labelled "
        f"({old_right / len(old):.0%})"
    )
    return lines


if __name__ == "__main__":
    print("\n".join(run()))
