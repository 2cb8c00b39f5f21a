"""`medeval report` on a real MedicationQA run: lm-eval with a scripted model and a two-judge panel
on a loopback OpenAI-compatible server (fixed verdicts, so the expected values are hand-computed),
then after `medeval judge` re-scores the same run (both in this process: e2e, they start lm-eval)."""

import json

import pytest
import yaml
from conftest import two_judge_panel

from medeval_metrics.testing.fake_judge import FakeJudgeServer

ROWS = [
    {
        "question": f"how often can i take drug{i}",
        "focus_drug": f"drug{i}",
        "question_type": ["Dose", "Usage"][i % 2],
        "answer": f"Drug{i} is taken once a day.",
        "section_title": "How to use",
        "url": f"https://example.org/{i}",
    }
    for i in range(6)
]
# judge-a: 5/4/4 everywhere; judge-b: accuracy 3, completeness 2 on even items and 4 on odd, clarity 5.
SCRIPT = {
    **{("judge-a", row["question"]): [{"scores": {"accuracy": 5, "completeness": 4, "clarity": 4}}] for row in ROWS},
    **{
        ("judge-b", row["question"]): [
            {"scores": {"accuracy": 3, "completeness": 2 if i % 2 == 0 else 4, "clarity": 5}}
        ]
        for i, row in enumerate(ROWS)
    },
}


@pytest.fixture(scope="module")
def judged_run(tmp_path_factory):
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    import medeval_metrics.testing.scripted
    from medeval_metrics.cli import main

    root = tmp_path_factory.mktemp("medicationqa")
    data = root / "medicationqa.json"
    data.write_text(json.dumps(ROWS))
    out = root / "out"
    with FakeJudgeServer(script=SCRIPT) as server:
        config = two_judge_panel(server, root / "cache.sqlite")
        manager = TaskManager(
            include_defaults=False,
            include_path=medeval_metrics.tasks_path(),
            metadata={"medicationqa_path": str(data), "medeval_judges": config},
        )
        tracker = EvaluationTracker(output_path=str(out))
        results = lm_eval.simple_evaluate(
            model="medeval-scripted",
            model_args="model=scripted-pharmacist",
            tasks=["medicationqa"],
            task_manager=manager,
            log_samples=True,
            evaluation_tracker=tracker,
        )
        samples = results.pop("samples")
        tracker.save_results_aggregated(results=results, samples=samples)
        tracker.save_results_samples(task_name="medicationqa", samples=samples["medicationqa"])
        # `medeval judge` afterwards, on the same server: every verdict comes from the cache
        requests = server.count()
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("MEDEVAL_JUDGES", config)
            assert main(["judge", str(out), "--quiet"]) == 0
        assert server.count() == requests + 2  # the health check's request per judge; verdicts from the cache
    return out, results["results"]["medicationqa"]


def check_judges(judges):
    assert judges["a"]["accuracy"] == {"value": 5.0, "stderr": 0.0, "n": 6, "missing": 0}
    assert judges["b"]["completeness"]["value"] == pytest.approx(3.0)
    assert judges["b"]["completeness"]["stderr"] == pytest.approx((1.2**0.5) / 6**0.5)  # 2,4,2,4,2,4


@pytest.mark.e2e  # judged_run starts lm-eval
def test_judged_run_to_report(judged_run, tmp_path):
    from PIL import Image

    from medeval_metrics.report import build_report
    from medeval_metrics.report.figures import figure_size

    out, task = judged_run
    # panel score per item: (5+4+4+3+2+5)/6 on even items, (5+4+4+3+4+5)/6 on odd: mean 4.0
    assert task["judge_panel_score,scored"] == pytest.approx(4.0)
    report = build_report([out], tmp_path)
    assert len(report["runs"]) == 1 and report["runs"][0]["results_file"].endswith("_judged.json")
    check_judges(json.loads((tmp_path / "judges.json").read_text())["scripted-pharmacist"]["medicationqa"])
    index = yaml.safe_load((tmp_path / "model_index.yaml").read_text())["model-index"][0]["results"][0]
    assert index["dataset"]["type"] == "truehealth/medicationqa" and index["dataset"]["split"] == "train"
    metrics = {m["type"]: m["value"] for m in index["metrics"]}
    assert metrics["llm_judge_panel_score"] == pytest.approx(4.0)
    assert metrics["llm_judge_accuracy"] == pytest.approx(4.0)  # (5 + 3) / 2 on every item
    assert "krippendorff_alpha" not in metrics and not any(t.startswith("judge_success") for t in metrics)
    breakdown = json.loads((tmp_path / "breakdowns.json").read_text())["scripted-pharmacist"]["medicationqa"]["scored"]
    assert breakdown["question_type"]["Dose"]["judge_panel_score"]["value"] == pytest.approx(23 / 6)
    assert breakdown["question_type"]["Usage"]["judge_panel_score"]["value"] == pytest.approx(25 / 6)
    with Image.open(tmp_path / "figures" / "scripted-pharmacist" / "medicationqa__judge_scores.png") as image:
        assert image.size == figure_size(5, 3)  # scores 2, 3, 4, 5 and 'none'; three dimensions
    with Image.open(tmp_path / "figures" / "scripted-pharmacist" / "medicationqa__question_type.png") as image:
        assert image.size == figure_size(2)


@pytest.mark.e2e  # judged_run starts lm-eval
def test_logged_filter_records_alone_give_the_same_judge_table(judged_run, tmp_path):
    """Without `medeval judge`'s files, the verdicts logged in the samples (filtered_resps) are read."""
    import shutil

    from medeval_metrics.report import build_report

    out, _ = judged_run
    only_run = tmp_path / "run"
    only_run.mkdir()
    for path in out.rglob("*"):
        if path.name.startswith(("results_", "samples_")) and not path.stem.endswith("_judged"):
            shutil.copy(path, only_run)
    report = build_report([only_run], tmp_path / "r", figures=False)
    assert not report["runs"][0]["results_file"].endswith("_judged.json")
    check_judges(json.loads((tmp_path / "r" / "judges.json").read_text())["scripted-pharmacist"]["medicationqa"])


def test_structured_judge_verdicts_are_read_without_literal_eval():
    from medeval_metrics.report.judges import judge_scores_of

    sample = {
        "judge_verdicts": {
            "a": {"scores": {"accuracy": 4, "clarity": 2}, "unscored_reason": None, "id_echoed": False},
            "b": {"scores": None, "unscored_reason": "HTTP 500 after 5 request(s)", "id_echoed": None},
        }
    }
    assert judge_scores_of(sample) == {"a": {"accuracy": 4.0, "clarity": 2.0}, "b": {"accuracy": None, "clarity": None}}
    as_text = {"judge_verdicts": json.dumps(sample["judge_verdicts"])}
    assert judge_scores_of(as_text) == judge_scores_of(sample)
