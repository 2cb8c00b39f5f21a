"""MedicationQA per-item scoring without a judge: rouge-score's ROUGE-L vs the pack's (same floats).

For each of the 690 references (the real spreadsheet from ../shared/data when present, else
synthetic text of the same size), a model-like answer of up to ~400 words is scored. Prints the
ROUGE-L time per item with rouge-score and with ``medeval_metrics.medicationqa.rouge`` (first pass,
stem cache empty, and a second pass), the whole ``process_results`` per item (ROUGE-L + BLEU) before
and after, the ratios, and how many of the 690 scores are bit-identical (must be all).
Environment knob: BENCH_ROUGE_ITEMS (690).
"""

from __future__ import annotations

import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT.parent / "shared" / "data" / "medicationqa" / "MedInfo2019-QA-Medications.xlsx"


def _rows(n_items: int) -> tuple[list[dict[str, str]], str]:
    from medeval_metrics import medicationqa as mqa

    if REAL.exists():
        rows = mqa.load_rows({"medicationqa_path": str(REAL)})
        return (rows * (n_items // len(rows) + 1))[:n_items], f"the real {REAL.name}"
    rng = random.Random(0)
    words = [
        "take",
        "tablets",
        "daily",
        "with",
        "food",
        "dose",
        "doctor",
        "pharmacist",
        "side",
        "effects",
        "may",
        "include",
        "nausea",
        "headache",
        "blood",
        "pressure",
        "kidney",
        "liver",
        "interaction",
        "alcohol",
        "children",
        "adults",
        "hours",
        "missed",
    ]
    rows = [
        {"question": f"question {i}", "answer": " ".join(rng.choice(words) for _ in range(rng.randint(5, 300)))}
        for i in range(n_items)
    ]
    return rows, "synthetic references (real spreadsheet absent)"


def _answers(rows: list[dict[str, str]]) -> list[str]:
    """Model-like answers: a chatty opening, then text from other references, up to ~400 words."""
    out = []
    for index in range(len(rows)):
        body = " ".join(rows[(index + k) % len(rows)]["answer"] for k in (1, 2, 3)).split()[:380]
        out.append("Sure! Here is what you should know. " + " ".join(body) + " Always ask your pharmacist.")
    return out


def run() -> list[str]:
    sys.path.insert(0, str(ROOT))
    from rouge_score import rouge_scorer

    from medeval_metrics.medicationqa import rouge, scoring

    n_items = int(os.environ.get("BENCH_ROUGE_ITEMS", "690"))
    rows, origin = _rows(n_items)
    answers = _answers(rows)
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)

    def rouge_score_l(prediction: str, reference: str) -> float:
        if not prediction.strip() or not reference.strip():
            return 0.0
        return float(scorer.score(reference, prediction)["rougeL"].fmeasure)

    def timed(fn):
        start = time.perf_counter()
        values = [fn(answer, row["answer"]) for answer, row in zip(answers, rows)]
        return values, (time.perf_counter() - start) / len(rows)

    before, before_s = timed(rouge_score_l)
    rouge._stems.clear()
    rouge.tokens.cache_clear()
    after, after_cold_s = timed(scoring.rouge_l)
    rouge.tokens.cache_clear()  # the stem cache stays: what every later item of a run sees
    _, after_warm_s = timed(scoring.rouge_l)
    identical = sum(a == b for a, b in zip(before, after))

    def process_results_time(rouge_l) -> float:
        original = scoring.rouge_l
        scoring.rouge_l = rouge_l
        try:
            start = time.perf_counter()
            for answer, row in zip(answers, rows):
                scoring.process_results(row, [{"answer": answer, "verdicts": None, "judges": None}])
            return (time.perf_counter() - start) / len(rows)
        finally:
            scoring.rouge_l = original

    scoring.bleu("warm up", "warm up")
    pr_before = process_results_time(rouge_score_l)
    rouge.tokens.cache_clear()
    pr_after = process_results_time(scoring.rouge_l)
    ms = 1000.0
    return [
        f"{len(rows)} items from {origin}; model-like answers of up to ~400 words",
        f"ROUGE-L per item: rouge-score {before_s * ms:.2f} ms; pack {after_cold_s * ms:.3f} ms (empty stem cache, "
        f"{before_s / after_cold_s:.1f}x faster), {after_warm_s * ms:.3f} ms warm ({before_s / after_warm_s:.1f}x)",
        f"process_results per item (ROUGE-L + BLEU, no judge): {pr_before * ms:.2f} ms -> {pr_after * ms:.2f} ms "
        f"({pr_before / pr_after:.1f}x faster)",
        f"scores bit-identical to rouge-score: {identical}/{len(rows)} (must be all)",
    ]


if __name__ == "__main__":
    for line in run():
        print(line)
