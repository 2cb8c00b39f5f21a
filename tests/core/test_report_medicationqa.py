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


def _run_folder(folder, results_metrics, version):
    """A MedicationQA run of 3 items logged with --log_samples: judge a scored items 0 and 1, judge b item 0."""
    folder.mkdir(parents=True)
    scored = {"scores": {"accuracy": 4, "completeness": 3, "clarity": 5}, "unscored_reason": None, "id_echoed": False}
    unscored = {"scores": None, "unscored_reason": "HTTP 500 after 5 request(s)", "id_echoed": None}
    verdicts = [{"a": scored, "b": scored}, {"a": scored, "b": unscored}, {"a": unscored, "b": unscored}]
    ratings = [[[4, 4], [3, 3], [5, 5]], [[4, None], [3, None], [5, None]], [[None, None]] * 3]
    with (folder / "samples_medicationqa_2026-03-01T10-00-00.000000.jsonl").open("w") as handle:
        for doc_id, (verdict, rating) in enumerate(zip(verdicts, ratings)):
            sample = {
                "doc_id": doc_id,
                "doc": {"question": f"q{doc_id}", "answer": "a", "question_type": "Dose"},
                "filter": "scored",
                "judge_verdicts": json.dumps(verdict),  # as lm-eval logs a dict-valued metric
                "judge_agreement": rating,
            }
            handle.write(json.dumps(sample) + "\n")
    results = {
        "results": {"medicationqa": {"alias": "medicationqa", **results_metrics}},
        "versions": {"medicationqa": version},
        "n-shot": {"medicationqa": 0},
        "n-samples": {"medicationqa": {"original": 690, "effective": 3}},
        "config": {"model": "hf", "model_args": "pretrained=org/model", "limit": 3},
    }
    (folder / "results_2026-03-01T10-00-00.000000.json").write_text(json.dumps(results))
    return folder, [tuple(tuple(row) for row in rating) for rating in ratings]


def test_per_judge_success_and_agreement_stderr_come_from_the_samples(tmp_path):
    """Task version 5 has no judge_success_<judge> metric and lm-eval writes "N/A" as judge_agreement's stderr:
    the report computes both from the logged samples, equal to what version 4's metrics gave."""
    from lm_eval.api.metrics import mean, mean_stderr

    from medeval_metrics.judge.aggregate import agreement_stderr
    from medeval_metrics.report import build_report

    common = {"judge_verdicts,scored": 2 / 3, "judge_agreement,scored": 1.0, "judge_agreement_stderr,scored": "N/A"}
    run, ratings = _run_folder(tmp_path / "v5", common, 5)
    report = build_report([run], tmp_path / "r5", figures=False)
    rows = {row["metric"]: row for row in report["runs"][0]["scores"]}
    # hand-computed: a scored 2 of 3 items (mean 2/3; sample sd sqrt(1/3), stderr 1/3), b 1 of 3 (1/3, 1/3)
    assert rows["judge_success_a"]["value"] == pytest.approx(2 / 3) and rows["judge_success_a"]["filter"] == "scored"
    assert rows["judge_success_a"]["stderr"] == pytest.approx(1 / 3)
    assert (rows["judge_success_b"]["value"], rows["judge_success_b"]["stderr"]) == (pytest.approx(1 / 3),) * 2
    # ... which is what version 4's lm-eval metrics were: the mean of a per-item 1/0, with lm-eval's stderr
    for judge, per_item in (("a", [1.0, 1.0, 0.0]), ("b", [1.0, 0.0, 0.0])):
        assert rows[f"judge_success_{judge}"]["value"] == pytest.approx(mean(per_item), abs=1e-15)
        assert rows[f"judge_success_{judge}"]["stderr"] == pytest.approx(mean_stderr(per_item), abs=1e-15)
    # lm-eval's value of the agreement stays; its "N/A" stderr becomes the bootstrap of the logged ratings
    assert rows["judge_agreement"]["value"] == 1.0
    assert rows["judge_agreement"]["stderr"] == agreement_stderr(ratings)
    assert "`judge_success_a`" in (tmp_path / "r5" / "results.md").read_text()

    # a version 4 run, whose results hold the per-judge metrics: shown once, as the results say
    old = {**common, "judge_success_a,scored": 2 / 3, "judge_success_a_stderr,scored": 1 / 3}
    run, _ = _run_folder(tmp_path / "v4", old, 4)
    rows = [row for row in build_report([run], tmp_path / "r4", figures=False)["runs"][0]["scores"]]
    assert [row["value"] for row in rows if row["metric"] == "judge_success_a"] == [2 / 3]
