"""End to end: lm-eval runs the medicationqa task with a two-judge panel on a loopback server;
``medeval judge`` re-scores the logged samples; a killed judging run resumes from the cache."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import REPO_ROOT, closed_port_url, find_results, run_cli, two_judge_panel

from medeval_metrics.testing.fake_judge import FakeJudgeServer

CANARY = "sk-canary-e2e-0000-leak-check"
JUDGE_METRICS = (
    "judge_accuracy",
    "judge_completeness",
    "judge_clarity",
    "judge_panel_score",
    "judge_reward",
    "judge_unscored_rate",
    "judge_agreement",
)
ROWS = [
    {
        "question": f"can i take drug{i} with food",
        "focus_drug": f"drug{i}",
        "question_type": ["Dose", "Usage", "Interaction"][i % 3],
        "answer": f"Drug{i} can be taken with or without food.",
        "section_title": "How to use",
        "url": f"https://example.org/{i}",
    }
    for i in range(12)
]


def _data_file(tmp_path: Path) -> Path:
    path = tmp_path / "medicationqa.json"
    path.write_text(json.dumps(ROWS))
    return path


def _judges(server: FakeJudgeServer, cache: Path) -> str:
    return two_judge_panel(server, cache, concurrency=8, api_key_env="E2E_JUDGE_KEY")


def _all_text(folder: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in folder.rglob("*") if p.is_file())


@pytest.mark.e2e
def test_run_with_two_judges_then_judge_logged_samples(tmp_path, tiny_model):
    cache, out = tmp_path / "cache.sqlite", tmp_path / "out"
    script = {("judge-a", ROWS[0]["question"]): [{"status": 429, "headers": {"Retry-After": "0"}}, {"status": 500}]}
    with FakeJudgeServer(script=script) as server:
        env = {
            "MEDEVAL_JUDGES": _judges(server, cache),
            "E2E_JUDGE_KEY": CANARY,
            "MEDEVAL_MEDICATIONQA_PATH": str(_data_file(tmp_path)),
        }
        run = run_cli(
            [
                "run",
                "--tasks",
                "medicationqa",
                "--model",
                "hf",
                "--model_args",
                f"pretrained={tiny_model}",
                "--limit",
                "10",
                "--device",
                "cpu",
                "--batch_size",
                "10",
                "--gen_kwargs",
                "max_gen_toks=16",
                "--output_path",
                str(out),
                "--log_samples",
                "--breakdown",  # print the breakdown tables (a plain run prints one line per task)
            ],
            cwd=tmp_path,
            env=env,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        checks = sum(1 for r in server.requests if r["question"] == "")  # the health check: one per judge
        assert checks == 2
        requests_after_run = server.count()
        assert requests_after_run == 20 + 2 + checks  # 10 answers x 2 judges, plus the 429 and the 500 retried
        assert {r["authorization"] for r in server.requests if r["model"] == "judge-a"} == {f"Bearer {CANARY}"}

        results, samples = find_results(out)
        task = results["results"]["medicationqa"]
        for metric in ("rougeL", "bleu", "judge_computed", *JUDGE_METRICS):
            assert metric in run.stdout, metric
            assert isinstance(task[f"{metric},scored"], float), metric
            if metric != "judge_agreement":  # lm-eval has no stderr for a corpus statistic: "N/A"
                assert isinstance(task[f"{metric}_stderr,scored"], float), metric  # lm-eval's mean_stderr
        assert task["judge_agreement_stderr,scored"] == "N/A"
        assert not [key for key in task if key.startswith("judge_success")]  # per judge: in the samples
        assert task["judge_computed,scored"] == 1.0 and task["judge_unscored_rate,scored"] == 0.0
        assert 1.0 <= task["judge_panel_score,scored"] <= 5.0
        # a full panel always scores all dimensions, so the MedARC reward is the HELM score / 5
        assert task["judge_reward,scored"] == pytest.approx(task["judge_panel_score,scored"] / 5)
        assert len(samples["medicationqa"]) == 10
        from medeval_metrics.report.judges import sample_statistics

        from_samples = sample_statistics(samples["medicationqa"])
        # both judges scored every item (judge a after a 429 and a 500)
        assert from_samples[("judge_success_a", "scored")] == {"value": 1.0, "stderr": 0.0, "n": 10}
        assert from_samples[("judge_success_b", "scored")]["value"] == 1.0
        assert from_samples[("judge_agreement", "scored")]["value"] == pytest.approx(task["judge_agreement,scored"])
        assert "**medicationqa** by question_type" in run.stdout  # --breakdown printed the tables after the run

        judged = run_cli(["judge", str(out), "--quiet"], cwd=tmp_path, env=env)
        assert judged.returncode == 0, judged.stderr[-3000:]
        assert server.count() == requests_after_run + 2  # every verdict came from the cache (2: the health check)

    judged_results = json.loads(next(out.rglob("results_*_judged.json")).read_text())
    rejudged = judged_results["results"]["medicationqa"]
    for metric in ("rougeL", "bleu", *JUDGE_METRICS):
        assert rejudged[f"{metric},scored"] == pytest.approx(task[f"{metric},scored"]), metric
        if metric != "judge_agreement":
            assert rejudged[f"{metric}_stderr,scored"] == pytest.approx(task[f"{metric}_stderr,scored"]), metric
    # the agreement's bootstrap stderr: medeval judge's equals the report's from the run's own samples
    stderr = from_samples[("judge_agreement", "scored")]["stderr"]
    assert isinstance(stderr, float) and rejudged["judge_agreement_stderr,scored"] == stderr
    assert judged_results["medeval_judge"]["medicationqa"]["rubric_version"] == "medicationqa-rubric-v2"
    verdict_lines = [json.loads(l) for l in next(out.rglob("judged_medicationqa_*.jsonl")).read_text().splitlines()]
    assert len(verdict_lines) == 10 and set(verdict_lines[0]["verdicts"]) == {"a", "b"}
    assert verdict_lines[0]["question_type"] == "Dose"

    everything = (
        run.stdout
        + run.stderr
        + judged.stdout
        + judged.stderr
        + _all_text(out)
        + cache.read_bytes().decode("utf-8", "replace")
    )
    assert CANARY not in everything


def _write_samples(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True)
    path = folder / "samples_medicationqa_2026-01-01T00-00-00.000000.jsonl"
    with path.open("w") as handle:
        for i in range(n):
            doc = {
                "question": f"question {i}",
                "answer": f"reference {i}",
                "question_type": "Dose",
                "focus_drug": "x",
                "section_title": "",
                "url": "",
            }
            handle.write(
                json.dumps({"doc_id": i, "doc": doc, "resps": [[f"model answer {i}"]], "filter": "scored"}) + "\n"
            )
    return path


@pytest.mark.e2e  # kill -9 of a `medeval judge` process, then its resume
def test_killed_judging_run_resumes_from_cache(tmp_path, monkeypatch):
    from medeval_metrics.judge.cache import VerdictCache
    from medeval_metrics.judge.cli import judge_output
    from medeval_metrics.judge.config import panel_from_obj

    n, judges = 40, 2
    _write_samples(tmp_path / "interrupted", n)
    _write_samples(tmp_path / "straight", n)
    cache = tmp_path / "cache.sqlite"
    with FakeJudgeServer(latency=0.05) as server:
        config = json.loads(_judges(server, cache))
        config["concurrency"] = 2
        env = {**os.environ, "MEDEVAL_JUDGES": json.dumps(config), "E2E_JUDGE_KEY": CANARY}
        command = [sys.executable, "-m", "medeval_metrics.cli", "judge", str(tmp_path / "interrupted"), "--quiet"]
        process = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.time() + 60
        while server.count() < 30 and time.time() < deadline and process.poll() is None:
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        process.wait()
        assert process.returncode == -signal.SIGKILL, "the run finished before it could be killed"
        first_run = server.count()
        cached = len(VerdictCache(cache))
        assert 0 < cached < n * judges

        resumed = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert resumed.returncode == 0, resumed.stderr[-2000:]
        # nothing cached was asked again (plus the health check's request per judge)
        assert server.count() - first_run == n * judges - cached + judges

        # an uninterrupted run with its own cache gives the same scores
        config["cache"] = str(tmp_path / "other.sqlite")
        monkeypatch.setenv("E2E_JUDGE_KEY", CANARY)
        straight = judge_output(tmp_path / "straight", panel_from_obj(config, "t"), progress=False)[0]
    resumed_results = json.loads(next((tmp_path / "interrupted").glob("*_judged.json")).read_text())["results"][
        "medicationqa"
    ]
    for metric, stats in straight["summary"].items():
        assert resumed_results[f"{metric},scored"] == pytest.approx(stats["value"]), metric
    assert CANARY not in resumed.stdout + resumed.stderr


@pytest.mark.e2e  # lm-eval (scripted backend, in this process)
def test_task_without_judges_runs_and_says_so(tmp_path, monkeypatch, caplog):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    import medeval_metrics.testing.scripted

    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    manager = TaskManager(
        include_defaults=False,
        include_path=medeval_metrics.tasks_path(),
        metadata={"medicationqa_path": str(_data_file(tmp_path))},
    )
    table = {"generate": {ROWS[0]["question"]: ROWS[0]["answer"]}, "default": "Ask your pharmacist."}
    results = lm_eval.simple_evaluate(
        model="medeval-scripted", model_args={"table": table}, tasks=["medicationqa"], task_manager=manager, limit=4
    )
    task = results["results"]["medicationqa"]
    assert task["judge_computed,scored"] == 0.0
    assert not any(key.startswith(("judge_panel", "judge_reward", "judge_accuracy")) for key in task)
    # doc 0 is answered with its reference exactly: ROUGE-L 1; the others share no word with theirs
    assert task["rougeL,scored"] == pytest.approx(0.25)
    assert isinstance(task["rougeL_stderr,scored"], float)
    assert "judge scores were NOT computed" in caplog.text


def _evaluate(tmp_path, metadata, model=None, limit=3):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    from medeval_metrics.testing.scripted import ScriptedLM

    manager = TaskManager(
        include_defaults=False,
        include_path=medeval_metrics.tasks_path(),
        metadata={"medicationqa_path": str(_data_file(tmp_path)), **metadata},
    )
    model = model or ScriptedLM({"default": "Take it with food."})
    return lm_eval.simple_evaluate(model=model, tasks=["medicationqa"], task_manager=manager, limit=limit), model


@pytest.mark.e2e  # lm-eval (scripted backend, in this process)
def test_judges_file_from_metadata(tmp_path, monkeypatch):

    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    monkeypatch.setenv("E2E_JUDGE_KEY", CANARY)
    with FakeJudgeServer() as server:
        judges_file = tmp_path / "judges.json"
        judges_file.write_text(_judges(server, tmp_path / "cache.sqlite"))
        results, _ = _evaluate(tmp_path, {"medeval_judges": str(judges_file)})
        assert server.count() == 6
    task = results["results"]["medicationqa"]
    assert task["judge_computed,scored"] == 1.0 and not [k for k in task if k.startswith("judge_success")]
    assert results["configs"]["medicationqa"]["metadata"]["medeval_judges"] == str(judges_file)
    # the samples name the panel by key only, and hold each judge's verdict
    sample = results["samples"]["medicationqa"][0]
    assert sample["doc"]["judge_panel_key"].startswith("panel-") and "judge_panel" not in sample["doc"]
    from medeval_metrics.judge.aggregate import success_by_judge

    assert set(success_by_judge([sample["judge_verdicts"]])) == {"a", "b"}
    assert server.url.split("//")[1].split("/")[0] not in json.dumps(results["samples"], default=str)
    assert CANARY not in json.dumps(results, default=str)


@pytest.mark.e2e  # lm-eval (scripted backend, in this process)
def test_bad_judge_setup_fails_before_any_generation(tmp_path, monkeypatch):
    from medeval_metrics.data import MedevalDataError

    monkeypatch.delenv("E2E_JUDGE_KEY", raising=False)
    unused_port = SimpleNamespace(url="http://127.0.0.1:9/v1/chat/completions")  # never contacted
    monkeypatch.setenv("MEDEVAL_JUDGES", _judges(unused_port, tmp_path / "c.sqlite"))
    from medeval_metrics.testing.scripted import ScriptedLM

    model = ScriptedLM({"default": "x"})
    with pytest.raises(MedevalDataError, match="E2E_JUDGE_KEY"):
        _evaluate(tmp_path, {}, model=model)
    assert model.requests_seen == []
    with pytest.raises(MedevalDataError, match="unknown field"):
        _evaluate(
            tmp_path, {"medeval_judges": {"judges": [{"backend": "hf", "model": "m", "colour": "red"}]}}, model=model
        )
    assert model.requests_seen == []


@pytest.mark.e2e  # lm-eval (scripted backend, in this process)
def test_chat_template_prompt(tmp_path, monkeypatch):
    import lm_eval
    from lm_eval.tasks import TaskManager

    import medeval_metrics
    from medeval_metrics.testing.scripted import ScriptedLM

    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    manager = TaskManager(
        include_defaults=False,
        include_path=medeval_metrics.tasks_path(),
        metadata={"medicationqa_path": str(_data_file(tmp_path))},
    )
    model = ScriptedLM({"default": "Take it with food."})
    lm_eval.simple_evaluate(
        model=model, tasks=["medicationqa"], task_manager=manager, limit=2, apply_chat_template=True
    )
    prompt, gen_kwargs = model.requests_seen[0].args
    assert prompt.startswith("<|user|>\nAnswer the following question about a medication")
    assert prompt.endswith(f"Question: {ROWS[0]['question']}\nAnswer:\n<|assistant|>\n")
    assert gen_kwargs["max_gen_toks"] == 512 and gen_kwargs["do_sample"] is False


@pytest.mark.e2e
def test_dead_judge_makes_medeval_run_exit_non_zero_with_one_line(tmp_path):
    """Issue 13: a judge at a closed port scores nothing; `medeval run` says so and exits 3
    (`--allow-unscored` opts out), after writing the results it has."""
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": "Take it with food."}))
    out = tmp_path / "out"
    judges = json.dumps(
        {
            "judges": [
                {"name": "dead", "backend": "local-chat-completions", "model": "m", "base_url": closed_port_url()}
            ],
            "cache": None,
            "max_retries": 0,
            "backoff_base": 0.01,
        }
    )
    env = {"MEDEVAL_JUDGES": judges, "MEDEVAL_MEDICATIONQA_PATH": str(_data_file(tmp_path))}
    # --skip-judge-check: the judge is found dead after generation (issue 21 checks it before: see
    # tests/core/test_judge_health.py), and the last line says how to re-judge without generating again
    args = [
        "run",
        "--tasks",
        "medicationqa",
        "--model",
        "medeval-scripted",
        "--model_args",
        f"table={table}",
        "--limit",
        "6",
        "--output_path",
        str(out),
        "--log_samples",
        "--skip-judge-check",
    ]
    run = run_cli(args, cwd=tmp_path, env=env)
    assert run.returncode == 3, run.stderr[-3000:]
    reason = [line for line in run.stderr.splitlines() if line.startswith("medeval: error:")]
    assert reason == [
        "medeval: error: judge(s) scored nothing: dead (medicationqa). Fix them, then re-judge without "
        f"generating again: medeval judge {out} (or pass --allow-unscored)."
    ]
    assert run.stderr.strip().splitlines()[-1] == reason[0]
    assert "Traceback" not in run.stderr
    assert list(out.rglob("results_*.json"))  # what the run produced is kept
    allowed = run_cli([*args, "--allow-unscored"], cwd=tmp_path, env=env)
    assert allowed.returncode == 0, allowed.stderr[-3000:]
    # without --output_path too: the exit code comes from the evaluation itself, not a results file
    no_output = run_cli([*args[: args.index("--output_path")], "--skip-judge-check"], cwd=tmp_path, env=env)
    assert no_output.returncode == 3, no_output.stderr[-3000:]
    assert (
        "judge(s) scored nothing: dead (medicationqa). Fix them, then run again with --output_path DIR "
        "--log_samples" in no_output.stderr.splitlines()[-1]
    )


@pytest.mark.e2e  # lm-eval (scripted backend, in this process), then `medeval judge`
def test_judge_url_credentials_never_reach_samples_results_or_logs(tmp_path, monkeypatch, caplog, capsys):
    """A base URL with user:password@ is used as given, but no sample, judged result, log line or printed
    line of the pack holds its credentials (the judges come from the environment: lm-eval copies
    --metadata into the results itself)."""
    import logging

    from lm_eval.loggers import EvaluationTracker

    from medeval_metrics.cli import main

    password = "pw-e2e-0000-leak-check"
    out = tmp_path / "out"
    caplog.set_level(logging.DEBUG)
    with FakeJudgeServer() as server:
        host = server.url.split("//", 1)[1]
        panel = json.loads(two_judge_panel(server, tmp_path / "cache.sqlite"))
        panel["judges"][0]["base_url"] = f"http://judge-user:{password}@{host}"
        # a judge that cannot be reached, with credentials too: its unscored reason and log lines
        panel["judges"].append(
            {"name": "down", "backend": "local-chat-completions", "model": "m", "base_url": closed_port_url()}
        )
        panel["judges"][-1]["base_url"] = panel["judges"][-1]["base_url"].replace("//", f"//u:{password}@")
        panel.update(max_retries=0, fail_fast=0)
        monkeypatch.setenv("MEDEVAL_JUDGES", json.dumps(panel))
        results, _ = _evaluate(tmp_path, {}, limit=3)
        assert results["results"]["medicationqa"]["judge_computed,scored"] == 1.0
        tracker = EvaluationTracker(output_path=str(out))
        samples = results.pop("samples")
        tracker.save_results_aggregated(results=results, samples=samples)
        tracker.save_results_samples(task_name="medicationqa", samples=samples["medicationqa"])
        assert main(["judge", str(out), "--quiet", "--allow-unscored", "--skip-judge-check"]) == 0
        from medeval_metrics.judge.health import panel_problems

        problems = panel_problems(panel_from_env())
    printed = capsys.readouterr()
    verdicts = [json.loads(line) for line in next(out.rglob("judged_medicationqa_*.jsonl")).read_text().splitlines()]
    assert verdicts[0]["verdicts"]["a"]["scores"] and not verdicts[0]["verdicts"]["down"]["scores"]
    block = json.loads(next(out.rglob("results_*_judged.json")).read_text())["medeval_judge"]["medicationqa"]
    assert block["judges"][0]["base_url"] == f"http://{host}"  # recorded without its credentials
    assert len(problems) == 1 and "cannot connect to 127.0.0.1:" in problems[0]
    everything = _all_text(out) + caplog.text + printed.out + printed.err + "\n".join(problems)
    assert "judge-user" in json.dumps(panel) and password not in everything
    assert "u:" + password not in everything and "judge-user" not in everything


def panel_from_env():
    from medeval_metrics.judge.config import load_panel

    return load_panel()
