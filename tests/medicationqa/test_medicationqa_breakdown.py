"""Question-type breakdown of MedicationQA from logged samples, and from ``medeval judge``."""

from __future__ import annotations

import json

import pytest

from medeval_metrics.breakdown import compute_breakdown, spec_for_task
from medeval_metrics.judge.cli import judge_output
from medeval_metrics.judge.config import panel_from_obj
from medeval_metrics.testing.fake_judge import FakeJudgeServer, default_scores


def test_breakdown_by_question_type_from_samples():
    spec = spec_for_task("medicationqa")
    samples = [
        {"doc": {"question_type": "Dose"}, "filter": "scored", "rougeL": 0.5, "judge_panel_score": 4.0},
        {"doc": {"question_type": "Dose"}, "filter": "scored", "rougeL": 0.3, "judge_panel_score": 2.0},
        # no judge score for this one: counted for rougeL only
        {"doc": {"question_type": "Usage"}, "filter": "scored", "rougeL": 0.1},
    ]
    out = compute_breakdown(samples, spec)["scored"]["question_type"]
    assert out["Dose"]["rougeL"]["value"] == pytest.approx(0.4) and out["Dose"]["rougeL"]["n"] == 2
    assert out["Dose"]["judge_panel_score"]["value"] == pytest.approx(3.0)
    assert out["Dose"]["judge_panel_score"]["stderr"] == pytest.approx(1.0)  # sd sqrt(2) / sqrt(2)
    assert "judge_panel_score" not in out["Usage"] and out["Usage"]["rougeL"]["n"] == 1


def test_medeval_judge_writes_breakdown_and_verdicts(tmp_path):
    folder = tmp_path / "run"
    folder.mkdir()
    types = ["Dose", "Dose", "Usage"]
    with (folder / "samples_medicationqa_2026-01-01T00-00-00.jsonl").open("w") as handle:
        for i, qtype in enumerate(types):
            doc = {"question": f"q{i}", "answer": "Take with food.", "question_type": qtype}
            handle.write(
                json.dumps({"doc_id": i, "doc": doc, "resps": [["Take it with food."]], "filter": "scored"}) + "\n"
            )
    (folder / "results_2026-01-01T00-00-00.json").write_text(
        json.dumps({"results": {"medicationqa": {"alias": "medicationqa"}}})
    )
    with FakeJudgeServer() as server:
        panel = panel_from_obj(
            {
                "judges": [{"name": "a", "backend": "local-chat-completions", "model": "m1", "base_url": server.url}],
                "cache": None,
            },
            "t",
        )
        entry = judge_output(folder, panel, progress=False)[0]
    expected_dose = sum(sum(default_scores("m1", f"q{i}").values()) / 3 for i in (0, 1)) / 2
    results = json.loads((folder / "results_2026-01-01T00-00-00_judged.json").read_text())
    block = results["medeval_judge"]["medicationqa"]
    assert block["breakdown"]["scored"]["question_type"]["Dose"]["judge_panel_score"]["value"] == pytest.approx(
        expected_dose
    )
    assert block["judges"][0]["model"] == "m1" and block["rubric_version"] == "medicationqa-rubric-v2"
    assert results["results"]["medicationqa"]["sample_len"] == 3
    assert "| Dose | 2 |" in entry["breakdown"]
    lines = [json.loads(l) for l in entry["verdicts"].read_text().splitlines()]
    assert [l["question_type"] for l in lines] == types
    assert lines[2]["verdicts"]["a"]["scores"] == default_scores("m1", "q2")


def test_medeval_judge_without_samples_is_a_clear_error(tmp_path):
    from medeval_metrics.data import MedevalDataError

    with pytest.raises(MedevalDataError, match="--log_samples"):
        judge_output(tmp_path, panel_from_obj([{"backend": "hf", "model": "m"}], "t"))
    with pytest.raises(MedevalDataError, match="no judge panel"):
        judge_output(tmp_path, None)
