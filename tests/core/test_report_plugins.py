"""How a benchmark plugs into the report: through its spec (``BenchmarkSpec.reporting``, its sources
and tasks). Shown with a MedicationQA-shaped judged run (results and samples written as lm-eval
writes them, judge verdicts as the judge filter logs them); a benchmark new to the pack is in
tests/core/test_registry_new_benchmark.py."""

import json

import pytest
import yaml

from medeval_metrics.report.metric_info import metric_info


@pytest.mark.parametrize(
    "benchmark, metric, in_index, hub_type",
    [
        ("emsqa", "acc", True, "accuracy"),
        ("emsqa", "invalid_letter", False, "invalid_letter_rate"),  # a diagnostic: tables only
        ("emsqa", "something_new", False, "something_new"),  # unlisted metric of a listed benchmark: tables only
        ("medicationqa", "judge_agreement", False, "krippendorff_alpha"),
        ("emrqa", "relaxed_em", True, "exact_match"),
        ("newbench", "score", True, "score"),  # an unlisted benchmark reports everything under lm-eval's names
    ],
)
def test_metric_info(benchmark, metric, in_index, hub_type):
    info = metric_info(benchmark, metric)
    assert (info.in_model_index, info.hub_type) == (in_index, hub_type)


@pytest.fixture
def judged_run(tmp_path):
    run = tmp_path / "run" / "org__model"
    run.mkdir(parents=True)
    date = "2026-02-01T10-00-00.000000"
    verdicts = [
        ({"accuracy": 5, "clarity": 4}, {"accuracy": 4, "clarity": 4}),
        ({"accuracy": 2, "clarity": 3}, None),
        ({"accuracy": 4, "clarity": 5}, {"accuracy": 4, "clarity": 5}),
    ]
    with (run / f"samples_medicationqa_{date}.jsonl").open("w") as out:
        for i, (a, b) in enumerate(verdicts):
            record = {
                "answer": f"answer {i}",
                "judges": ["judge-a", "judge-b"],
                "verdicts": {
                    "judge-a": {"judge": "judge-a", "scores": a},
                    "judge-b": {"judge": "judge-b", "scores": b},
                },
            }
            out.write(
                json.dumps(
                    {
                        "doc_id": i,
                        "doc": {"question_type": "Dose" if i < 2 else "Usage"},
                        "filter": "judge",
                        "filtered_resps": [str(record)],
                        "judge_panel_score": 4.0,
                        "rougeL": 0.2,
                    }
                )
                + "\n"
            )
    results = {
        "results": {
            "medicationqa": {
                "judge_panel_score,judge": 3.9,
                "judge_panel_score_stderr,judge": 0.3,
                "judge_agreement,judge": 0.41,
                "judge_agreement_stderr,judge": 0.1,
                "judge_ok_judge-a,judge": 1.0,
                "judge_ok_judge-a_stderr,judge": 0.0,
                "rougeL,judge": 0.2,
                "rougeL_stderr,judge": "N/A",
            }
        },
        "versions": {"medicationqa": 1},
        "n-shot": {"medicationqa": 0},
        "n-samples": {"medicationqa": {"original": 690, "effective": 690}},
        "config": {
            "model": "openai-chat-completions",
            "model_args": "model=org/model,api_key=sk-abcdefgh12345678",
            "limit": None,
        },
    }
    (run / f"results_{date}.json").write_text(json.dumps(results))
    return tmp_path / "run"


def test_a_judged_benchmark_plugs_in(judged_run, tmp_path):
    from PIL import Image

    from medeval_metrics.report import build_report
    from medeval_metrics.report.figures import figure_size

    out = tmp_path / "report"
    report = build_report([judged_run], out)
    index = yaml.safe_load((out / "model_index.yaml").read_text())["model-index"][0]
    assert index["name"] == "org/model"
    result = index["results"][0]
    assert result["dataset"] == {
        "name": "MedicationQA (medicationqa)",
        "type": "truehealth/medicationqa",
        "split": "train",
        "args": {"num_few_shot": 0},
    }
    assert [(m["type"], m["value"]) for m in result["metrics"]] == [("rouge", 0.2), ("llm_judge_panel_score", 3.9)]
    text = (out / "results.md").read_text()
    assert (
        "| Judge agreement (Krippendorff's alpha) (`judge_agreement`) | 0.4100 | 0.1000 | 0.214–0.606 (normal) | 690 |"
        in text
    )
    assert "| ROUGE-L (`rougeL`) | 0.2000 | N/A | – | 690 |" in text  # a non-numeric stderr is shown as such
    assert "sk-abcdefgh" not in text and "api_key" not in text
    judges = json.loads((out / "judges.json").read_text())["org/model"]["medicationqa"]
    assert judges["judge-a"]["accuracy"]["value"] == pytest.approx(11 / 3)
    assert judges["judge-b"]["accuracy"] == {"value": 4.0, "stderr": 0.0, "n": 2, "missing": 1}
    # scores 2, 3, 4, 5 and 'none', two dimensions
    with Image.open(out / "figures" / "org_model" / "medicationqa__judge_scores.png") as image:
        assert image.size == figure_size(5, 2)
    assert "figures/org_model/medicationqa__judge_scores.png" in report["figures"]
