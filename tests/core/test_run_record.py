"""Issue 23.11: per-task wall time and, for a judged task, the judges' requests and tokens (from the API's usage
fields) in the results, the summary line and the report."""

from __future__ import annotations

import inspect
import json

import pytest

from medeval_metrics import lm_eval_compat
from medeval_metrics.report.runs import Run
from medeval_metrics.report.tables import run_time_table


def test_lm_eval_records_no_per_task_time():
    """When this fails, lm-eval times tasks itself and ``run_record``'s timing may go."""
    import lm_eval.evaluator

    source = inspect.getsource(lm_eval.evaluator.evaluate)
    assert "perf_counter" not in source and "time.time" not in source


def test_the_judges_usage_is_counted_from_the_reply_s_usage_fields():
    from medeval_metrics.judge import transport

    transport.USAGE.pop("j-test", None)
    transport.count_usage("j-test", {"choices": [], "usage": {"prompt_tokens": 120, "completion_tokens": 30}})
    transport.count_usage("j-test", {"choices": []})  # a server that reports no usage: a request, no tokens
    assert transport.USAGE.pop("j-test") == {"requests": 2, "prompt_tokens": 120, "completion_tokens": 30}


def test_the_record_sums_the_parts_and_keeps_judge_usage_for_judged_tasks():
    from collections import Counter

    times = {"a": Counter({"prepare_s": 0.5, "model_s": 2.0, "scoring_s": 0.25}), "?": Counter({"model_s": 9.0})}
    record = lm_eval_compat._run_record(times, {"a": Counter({"requests": 4, "prompt_tokens": 10})})
    assert record == {
        "a": {
            "prepare_s": 0.5,
            "model_s": 2.0,
            "filters_s": 0.0,
            "scoring_s": 0.25,
            "wall_s": 2.75,
            "judge": {"requests": 4, "prompt_tokens": 10},
        }
    }


def test_the_report_table_shows_time_and_judge_usage():
    run = Run(
        results_path=__import__("pathlib").Path("/x/results_2026-01-01T00-00-00.json"),
        results={
            "medeval_run": {
                "tasks": {
                    "medicationqa": {
                        "wall_s": 6.04,
                        "model_s": 1.5,
                        "filters_s": 4.2,
                        "judge": {"requests": 16, "prompt_tokens": 4176, "completion_tokens": 320},
                    },
                    "emsqa_private": {"wall_s": 0.1, "model_s": 0.05},
                }
            }
        },
    )
    # each task's own steps (medicationqa: its judging filter, 4.2 s), and the model calls lm-eval made for both
    # tasks together once (1.5 + 0.05 s), not each task's share of them as its own time
    assert run_time_table(run).splitlines()[2:5] == [
        "| `emsqa_private` | 0.0 | 0.0 | shared (below) | – | – |",
        "| `medicationqa` | 4.2 | 4.2 | shared (below) | 16 | 4,176 + 320 |",
        "| model calls of `emsqa_private`, `medicationqa` together (generate_until) | | | 1.6 | | |",
    ]


@pytest.mark.e2e
def test_a_run_records_each_task_s_time_and_its_judges_tokens(tmp_path, capsys):
    from conftest import find_results, run_medeval

    from medeval_metrics import demo
    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    with FakeJudgeServer() as server:
        meta = demo.demo_metadata(tmp_path, server.url)
        (tmp_path / "t.json").write_text(json.dumps(demo.answer_table(meta)))
        proc = run_medeval(
            [
                "run",
                "--model",
                "medeval-scripted",
                "--model_args",
                f"table={tmp_path / 't.json'}",
                "--tasks",
                "emsqa_private,medicationqa",
                "--metadata",
                json.dumps(meta),
                "--output_path",
                str(tmp_path / "out"),
                "--log_samples",
            ],
            capsys,
        )
        requests = server.count()  # 2 judges x 8 items, and the health check's one request per judge
    assert proc.returncode == 0, proc.stderr[-2000:]
    results, _ = find_results(tmp_path / "out")
    tasks = results["medeval_run"]["tasks"]
    assert set(tasks) == {"emsqa_private", "medicationqa"} and all(t["wall_s"] > 0 for t in tasks.values())
    assert results["medeval_run"]["setup_s"] > 0  # the model built and the data loaded: once for the run
    judge = tasks["medicationqa"]["judge"]
    assert (
        judge["requests"] == 16 and requests == 16 + 2 and judge["prompt_tokens"] > 0 and judge["completion_tokens"] > 0
    )
    assert "judge" not in tasks["emsqa_private"]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("medeval: medicationqa: "))
    assert line.startswith("medeval: medicationqa: judge_panel_score ") and "judges: 16 requests, " in line
