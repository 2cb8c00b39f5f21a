"""Issue 33: the report's labels, tables, ranges, run times and intervals are right. Every metric a pack task
can report has a readable label and a range; a benchmark's headline metrics (``MetricInfo.headline``) make the
first table and the rest a "Diagnostics" table (results.md, report.html); a value's accepted range
(``MetricInfo.bounds``) is not its figure's scale; run times are each task's own, with the model's time once for
tasks that share their model calls and the set-up once; proportions get Wilson intervals, named. No lm-eval run."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from medeval_metrics.report import build_report

DATE = "2026-01-01T10-00-00.000001"


# --------------------------------------------------------------------------- labels


def every_pack_metric():
    from medeval_metrics import registry

    for spec in registry.benchmarks():
        for task in spec.tasks:
            for metric in task.metrics:
                yield spec.name, task.name, metric


@pytest.mark.parametrize("benchmark, task, metric", sorted(set(every_pack_metric())))
def test_every_metric_of_every_task_has_a_readable_label(benchmark, task, metric):
    from medeval_metrics.report.metric_info import metric_info, metric_range

    info = metric_info(benchmark, metric)
    assert info.label != metric and "_" not in info.label, (task, metric, info.label)
    assert metric_range(benchmark, metric) is not None, (task, metric)  # its numbers are checked


@pytest.mark.parametrize(
    "metric, label",
    [
        ("judge_panel_score_helm", "LLM-judge panel score, HELM's rules (1-5)"),
        ("judge_reward_medarc", "LLM-judge reward, MedARC's rules (0-1)"),
        ("judge_id_echo_rate", "Judge verdicts that copied the answer id"),
        ("judge_verdicts", "Items at least one judge scored"),
        ("judge_success_gpt-4o", "Items judge gpt-4o scored"),  # named at run time: the spec's pattern
        ("bertscore_f1", "BERTScore F1"),
    ],
)
def test_the_judge_and_overlap_metrics_read_as_words(metric, label):
    from medeval_metrics.report.metric_info import metric_info, metric_range

    assert metric_info("medicationqa", metric).label == label
    assert metric_range("medicationqa", metric) is not None


def test_an_exact_key_wins_over_a_pattern_and_a_longer_pattern_over_a_shorter():
    from medeval_metrics.spec import MetricInfo, Reporting

    reporting = Reporting(
        "X",
        "qa",
        "a",
        {
            "judge_*": MetricInfo("judge {}", "j"),
            "judge_success_*": MetricInfo("success of {}", "s"),
            "judge_success_x": MetricInfo("exact", "e"),
        },
    )
    assert reporting.info("judge_success_x").label == "exact"
    assert reporting.info("judge_success_y").label == "success of y"
    assert reporting.info("judge_other").label == "judge other"
    assert reporting.info("unlisted") is None


# --------------------------------------------------------------------------- headline and diagnostics

HEADLINE = {  # in the task YAML's metric_list order
    "judge_accuracy": 4.0,
    "judge_completeness": 3.5,
    "judge_clarity": 4.2,
    "judge_panel_score": 3.9,
    "judge_unscored_rate": 0.05,
    "judge_agreement": 0.41,
}
DIAGNOSTICS = {
    "rougeL": 0.2,
    "bleu": 3.5,
    "bertscore_f1": 0.81,
    "judge_reward": 0.77,
    "judge_panel_score_helm": 3.8,
    "judge_reward_medarc": 0.75,
    "judge_id_echo_rate": 0.0,
    "judge_verdicts": 0.95,
    "judge_success_a": 0.95,
}


def medicationqa_run(folder: Path) -> Path:
    folder.mkdir(parents=True)
    metrics = {"alias": "medicationqa", "judge_computed,scored": 1.0}
    for name, value in {**HEADLINE, **DIAGNOSTICS}.items():
        metrics[f"{name},scored"] = value
        metrics[f"{name}_stderr,scored"] = 0.01
    results = {
        "results": {"medicationqa": metrics},
        "versions": {"medicationqa": 5},
        "n-shot": {"medicationqa": 0},
        "n-samples": {"medicationqa": {"original": 690, "effective": 690}},
        "config": {"model": "hf", "model_args": "pretrained=org/model", "limit": None},
    }
    (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    return folder


def table_metrics(text: str) -> list[str]:
    return re.findall(r"\(`([A-Za-z0-9_-]+)`\) \|", text)


def test_medicationqa_s_headline_table_holds_the_panel_and_the_rest_is_diagnostics(tmp_path):
    medicationqa_run(tmp_path / "run" / "m")
    build_report([tmp_path / "run"], tmp_path / "r", figures=False, html=True)
    results = (tmp_path / "r" / "results.md").read_text()
    headline, diagnostics = results.split("Diagnostics:")
    assert table_metrics(headline) == list(HEADLINE)
    assert sorted(table_metrics(diagnostics.split("Notes:")[0])) == sorted(DIAGNOSTICS)
    card = (tmp_path / "r" / "card_section.md").read_text()
    assert table_metrics(card) == list(HEADLINE) and "Diagnostics" not in card
    assert "10 bookkeeping and diagnostic metrics" in card  # the 9 diagnostics and judge_computed
    page = (tmp_path / "r" / "report.html").read_text()
    top, bottom = page.split("<h3>Diagnostics</h3>")
    assert re.findall(r"\(<code>([a-z_A-Z0-9-]+)</code>\)", top) == list(HEADLINE)
    assert sorted(re.findall(r"\(<code>([a-z_A-Z0-9-]+)</code>\)", bottom.split("</table>")[0])) == sorted(DIAGNOSTICS)
    assert "Items judge a scored (<code>judge_success_a</code>)" in bottom


def test_a_task_outside_the_pack_keeps_every_metric_in_its_table():
    from medeval_metrics.report.metric_info import metric_info

    assert metric_info("", "anything").headline is True
    assert metric_info("emsqa", "not_in_the_spec").headline is False  # a pack metric its spec does not list


# --------------------------------------------------------------------------- the range checked is not the figure's


def test_retrieved_documents_above_the_figure_scale_is_accepted():
    from medeval_metrics.report.metric_info import metric_info, metric_range, value_problem

    assert metric_info("emsqa", "retrieved_documents").scale == (0.0, 32.0)  # the figures' axis
    assert metric_range("emsqa", "retrieved_documents") == (0.0, math.inf)  # rag_k has no upper limit
    assert value_problem(40.0, metric_range("emsqa", "retrieved_documents")) is None
    assert value_problem(-1.0, metric_range("emsqa", "retrieved_documents")) == (
        "-1 is outside the metric's range 0 to no limit"
    )
    assert value_problem(1.5, metric_range("emsqa", "acc")) == "1.5 is outside the metric's range 0 to 1"


def test_a_rag_run_with_rag_k_above_32_is_reported(tmp_path):
    folder = tmp_path / "run" / "m"
    folder.mkdir(parents=True)
    task = "emsqa_public_rag"
    results = {
        "results": {task: {"acc,flexible-extract": 0.5, "retrieved_documents,flexible-extract": 40.0}},
        "n-samples": {task: {"original": 3721, "effective": 3721}},
        "config": {"model": "hf", "model_args": "pretrained=org/model", "limit": None},
    }
    (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    build_report([tmp_path / "run"], tmp_path / "r", figures=False)
    assert (
        "| Documents retrieved per item (`retrieved_documents`) | 40.0000 |"
        in (tmp_path / "r" / "results.md").read_text()
    )


# --------------------------------------------------------------------------- run times


def timed_run(tmp_path: Path):
    from medeval_metrics.report.runs import Run

    # two generative tasks answered in the same model calls (lm-eval shares the 567.4 s out by request count),
    # one log-likelihood task alone in its calls
    results = {
        "results": {},
        "configs": {
            "emsqa_public_cot": {"output_type": "generate_until"},
            "medicationqa": {"output_type": "generate_until"},
            "emsqa_public_mc": {"output_type": "multiple_choice"},
        },
        "medeval_run": {
            "setup_s": 41.25,
            "tasks": {
                "emsqa_public_cot": {"prepare_s": 2.0, "model_s": 283.7, "filters_s": 0.5, "scoring_s": 1.0},
                "medicationqa": {
                    "prepare_s": 0.25,
                    "model_s": 283.7,
                    "filters_s": 30.0,
                    "scoring_s": 0.1,
                    "judge": {"requests": 16, "prompt_tokens": 4176, "completion_tokens": 320},
                },
                "emsqa_public_mc": {"prepare_s": 1.0, "model_s": 12.5, "filters_s": 0.0, "scoring_s": 0.5},
            },
        },
    }
    for entry in results["medeval_run"]["tasks"].values():
        entry["wall_s"] = sum(v for k, v in entry.items() if k.endswith("_s"))
    return Run(results_path=tmp_path / f"results_{DATE}.json", results=results, label="m")


def test_each_task_s_own_time_the_shared_model_time_once_and_the_set_up_once(tmp_path):
    from medeval_metrics.report.tables import run_time_table

    table = run_time_table(timed_run(tmp_path))
    assert table.splitlines()[0] == "Set-up, once for the run (model built, data loaded): 41.2 s."
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == [
        "| `emsqa_public_cot` | 3.5 | 0.5 | shared (below) | – | – |",  # 2.0 + 0.5 + 1.0
        "| `emsqa_public_mc` | 1.5 | 0.0 | 12.5 | – | – |",  # alone in its calls: its own model time
        "| `medicationqa` | 30.4 | 30.0 | shared (below) | 16 | 4,176 + 320 |",
        "| model calls of `emsqa_public_cot`, `medicationqa` together (generate_until) | | | 567.4 | | |",
    ]
    assert table.count("567.4") == 1 and "283.7" not in table


def test_the_page_gives_the_same_times(tmp_path):
    from medeval_metrics.report.html import _run_time_table

    page = _run_time_table(timed_run(tmp_path))
    assert page.count("567.4") == 1 and "283.7" not in page and "41.2 s" in page
    assert "<td class=num>12.5</td>" in page and "<td class=num>30.4</td>" in page


# --------------------------------------------------------------------------- intervals


def emsqa_private_run(folder: Path, accs: list[float]) -> None:
    folder.mkdir(parents=True)
    mean = sum(accs) / len(accs)
    results = {
        "results": {"emsqa_private": {"acc,flexible-extract": mean, "acc_stderr,flexible-extract": 0.0}},
        "n-samples": {"emsqa_private": {"original": len(accs), "effective": len(accs)}},
        "config": {"model": "hf", "model_args": "pretrained=org/model", "limit": None},
    }
    (folder / f"results_{DATE}.json").write_text(json.dumps(results))
    rows = [
        {
            "doc_id": i,
            "doc": {"id": str(i), "question": "q", "level": ["emt"], "category": ["trauma" if i < 2 else "airway"]},
            "filter": "flexible-extract",
            "acc": acc,
            "unparseable": 0.0,
        }
        for i, acc in enumerate(accs)
    ]
    (folder / f"samples_emsqa_private_{DATE}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_proportion_at_1_of_n_has_a_wilson_interval_in_the_tables(tmp_path):
    emsqa_private_run(tmp_path / "run" / "m", [1.0, 1.0])
    build_report([tmp_path / "run"], tmp_path / "r", figures=False, html=True)
    results = (tmp_path / "r" / "results.md").read_text()
    # 2 of 2 by hand: centre (1 + 1.9207) / 2.9207 = 0.6712, half-width 0.6711 * 0.4900 = 0.3288
    assert "| 1.0000 | 0.0000 | 0.342–1.000 (Wilson) | 2 |" in results
    assert "| Unparseable answer rate (`unparseable`) |" not in results  # not in the results file: no row
    assert "95% CI: Wilson score interval for proportions" in results
    assert "<td class=num>0.342–1.000 (Wilson)</td>" in (tmp_path / "r" / "report.html").read_text()


def test_the_category_figure_draws_wilson_intervals_and_names_them(tmp_path, monkeypatch):
    from medeval_metrics.report import figures

    drawn = {}
    monkeypatch.setattr(figures, "_save", lambda fig, path: drawn.setdefault(Path(path).name, fig) and path)
    # trauma: 2 items at 1; airway: 1 item at 0
    emsqa_private_run(tmp_path / "run" / "m", [1.0, 1.0, 0.0])
    build_report([tmp_path / "run"], tmp_path / "r", figures=True)
    fig = drawn["emsqa_private__subject_area.png"]
    ax = fig.axes[0]
    assert "95% Wilson score interval" in ax.get_xlabel()
    assert not any("(no CI)" in t.get_text() for t in ax.texts)  # one item has its interval too
    segments = [s for c in ax.collections if c.__class__.__name__ == "LineCollection" for s in c.get_segments()]
    spans = sorted((round(float(s[0][0]), 3), round(float(s[1][0]), 3)) for s in segments)
    assert spans == [(0.0, 0.793), (0.342, 1.0)]  # 0 of 1: (0, 0.793); 2 of 2: (0.342, 1)
