"""emrQA's windowed variant: a note cut to a few lines around its evidence, at a seeded position."""

from __future__ import annotations

import json
from typing import Any

from medeval_metrics.emrqa.seeding import stable_fraction

WINDOW_LINES = 12  # windowed variant: lines of note around the evidence


def window_doc(doc: dict[str, Any], seed: int, lines: int = WINDOW_LINES) -> dict[str, Any]:
    """The note cut to ``lines`` lines that hold the first gold evidence, at a seeded position.

    Gold answers whose evidence falls outside the window are dropped (as in para-level emrQA,
    Rawat et al. 2020); positions are re-based onto the window.
    """
    note = doc["note"]
    answers = json.loads(doc["answers_json"])
    anchor = next((a for a in answers if a["evidence_start"] >= 0), None)
    starts = [0] + [i + 1 for i, ch in enumerate(note) if ch == "\n"]
    if anchor is None:
        first_line = 0
    else:
        ev_first = max(i for i, s in enumerate(starts) if s <= anchor["evidence_start"])
        ev_last = max(i for i, s in enumerate(starts) if s <= anchor["evidence_start"] + len(anchor["evidence"]) - 1)
        slack = max(0, lines - (ev_last - ev_first + 1))
        # Seeded offset so the evidence is not always in the same place in the window.
        first_line = max(0, ev_first - int(stable_fraction(seed, "window", doc["qa_id"]) * (slack + 1)))
    last_line = min(len(starts), first_line + max(lines, 1))
    begin = starts[first_line]
    end = starts[last_line] - 1 if last_line < len(starts) else len(note)
    kept = []
    for answer in answers:
        s = answer["evidence_start"]
        if s >= begin and s + len(answer["evidence"]) <= end:
            kept.append({**answer, "evidence_start": s - begin})
    out = dict(doc)
    out["qa_id"] = doc["qa_id"] + "@window"  # distinct from the whole-note item in logs and tables
    out["note"] = note[begin:end]
    # Evidence longer than the window, or never located: keep the first answer, position unknown.
    out["answers_json"] = json.dumps(kept or [{**answers[0], "evidence_start": -1}], sort_keys=True)
    return out
