"""medeval report gives emrQA's corpus macro-F1 a standard error from the logged (gold, predicted) pairs:
lm-eval's table says "N/A" for an aggregation it does not know, and the pack no longer patches that."""

from __future__ import annotations

import json

import pytest

from medeval_metrics.emrqa.scoring import macro_f1_stderr
from medeval_metrics.report.runs import Run
from medeval_metrics.report.tables import score_rows

PAIRS = [["smoker", "smoker"], ["non-smoker", "smoker"], ["non-smoker", "non-smoker"], ["unknown", None]]


def _run(tmp_path, samples):
    results = {
        "results": {
            "emrqa_smoking": {"alias": "emrqa_smoking", "acc,none": 0.5, "acc_stderr,none": 0.28,
                              "macro_f1,none": 0.4, "macro_f1_stderr,none": "N/A"}
        },
        "versions": {"emrqa_smoking": 2},
        "n-samples": {"emrqa_smoking": {"original": 4, "effective": 4}},
        "config": {"model_args": "pretrained=m"},
    }  # fmt: skip
    path = tmp_path / "results_2026-12-05T10-00-00.json"
    path.write_text(json.dumps(results))
    sample_paths = {}
    if samples is not None:
        sample_path = tmp_path / "samples_emrqa_smoking_2026-12-05T10-00-00.jsonl"
        sample_path.write_text("".join(json.dumps(s) + "\n" for s in samples))
        sample_paths["emrqa_smoking"] = sample_path
    return Run(results_path=path, results=results, sample_paths=sample_paths)


def _stderr(rows, metric):
    (row,) = [r for r in rows if r.metric == metric]
    return row.stderr


def test_macro_f1_stderr_comes_from_the_logged_pairs(tmp_path):
    samples = [{"doc_id": i, "filter": "none", "acc": 0.0, "macro_f1": pair} for i, pair in enumerate(PAIRS)]
    rows = score_rows(_run(tmp_path, samples))
    assert _stderr(rows, "macro_f1") == pytest.approx(macro_f1_stderr([tuple(p) for p in PAIRS]))
    assert _stderr(rows, "macro_f1") > 0
    assert _stderr(rows, "acc") == 0.28  # lm-eval's own, as it wrote it


def test_without_samples_the_stderr_stays_not_available(tmp_path):
    assert _stderr(score_rows(_run(tmp_path, None)), "macro_f1") is None


def test_one_logged_pair_gives_no_stderr(tmp_path):
    samples = [{"doc_id": 0, "filter": "none", "macro_f1": PAIRS[0]}]
    assert _stderr(score_rows(_run(tmp_path, samples)), "macro_f1") is None
