"""The report's breakdowns of a run re-scored by ``medeval judge`` are recomputed from the samples and
the judged records (the one breakdown function), never read back from the results JSON."""

import json

import pytest

DATE = "2026-02-01T10-00-00.000000"
STAMP = "2026-02-02T10-00-00.000000"


def rejudged_run(folder, stored_breakdown):
    folder.mkdir(parents=True)
    docs = [
        {"question": f"q{i}", "answer": "a", "question_type": qtype}
        for i, qtype in enumerate(["Dose", "Dose", "Usage"])
    ]
    with (folder / f"samples_medicationqa_{DATE}.jsonl").open("w") as handle:
        # logged twice for doc 0 (repeats): scored once, as `medeval judge` scores it; lm-eval's own
        # metrics here (rougeL 0.9) are superseded by the judged records'
        for doc_id in (0, 0, 1, 2):
            handle.write(
                json.dumps({"doc_id": doc_id, "doc": docs[doc_id], "resps": [["x"]], "filter": "scored", "rougeL": 0.9})
                + "\n"
            )
    judged = [
        {"rougeL": 0.2, "judge_panel_score": 4.0},
        {"rougeL": 0.4, "judge_panel_score": 2.0},
        {"rougeL": 0.6, "judge_panel_score": 5.0},
    ]
    with (folder / f"judged_medicationqa_{STAMP}.jsonl").open("w") as handle:
        for doc_id, metrics in enumerate(judged):
            handle.write(
                json.dumps(
                    {
                        "doc_id": doc_id,
                        "question_type": docs[doc_id]["question_type"],
                        "verdicts": None,
                        "metrics": metrics,
                    }
                )
                + "\n"
            )
    results = {
        "results": {
            "medicationqa": {
                "alias": "medicationqa",
                "rougeL,scored": 0.4,
                "rougeL_stderr,scored": 0.1,
                "judge_panel_score,scored": 11 / 3,
                "judge_panel_score_stderr,scored": 0.9,
            }
        },
        "versions": {"medicationqa": 1},
        "n-shot": {"medicationqa": 0},
        "n-samples": {"medicationqa": {"original": 690, "effective": 3}},
        "config": {"model": "hf", "model_args": "pretrained=org/model", "limit": 3},
        "medeval_judge": {"medicationqa": {"judged_at": STAMP, "breakdown": stored_breakdown}},
    }
    (folder / f"results_{DATE}.json").write_text(json.dumps({k: v for k, v in results.items() if k != "medeval_judge"}))
    (folder / f"results_{DATE}_judged.json").write_text(json.dumps(results))
    return folder


def test_breakdown_is_recomputed_from_the_judged_records(tmp_path):
    from medeval_metrics.report import build_report

    stale = {"scored": {"question_type": {"Dose": {"rougeL": {"value": 123.0, "stderr": 0.0, "n": 99}}}}}
    run = rejudged_run(tmp_path / "run", stale)
    build_report([run], tmp_path / "report", figures=False)
    by_type = json.loads((tmp_path / "report" / "breakdowns.json").read_text())["org/model"]["medicationqa"]["scored"][
        "question_type"
    ]
    assert by_type["Dose"]["rougeL"] == {"value": pytest.approx(0.3), "stderr": pytest.approx(0.1), "n": 2}
    assert by_type["Dose"]["judge_panel_score"]["value"] == pytest.approx(3.0)
    assert by_type["Usage"]["judge_panel_score"] == {"value": 5.0, "stderr": None, "n": 1}  # no stderr from one item


def test_without_the_judged_records_the_logged_metrics_are_used(tmp_path):
    from medeval_metrics.report import build_report

    run = rejudged_run(tmp_path / "run", {})
    next(run.glob("judged_*.jsonl")).unlink()
    build_report([run], tmp_path / "report", figures=False)
    by_type = json.loads((tmp_path / "report" / "breakdowns.json").read_text())["org/model"]["medicationqa"]["scored"][
        "question_type"
    ]
    assert by_type["Dose"]["rougeL"]["n"] == 3 and by_type["Dose"]["rougeL"]["value"] == pytest.approx(0.9)
