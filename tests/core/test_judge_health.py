"""The judges' health check (issue 21): one tiny request per judge before anything is generated."""

from __future__ import annotations

import json

import pytest
from conftest import closed_port_url, run_cli

from medeval_metrics.cli import main
from medeval_metrics.judge.cli import rejudge_hint, run_unscored_exit_code
from medeval_metrics.judge.config import panel_from_obj
from medeval_metrics.judge.health import panel_problems
from medeval_metrics.preflight import read_command_line
from medeval_metrics.testing.fake_judge import FakeJudgeServer


def _panel(judges):
    return panel_from_obj({"judges": judges, "cache": None}, "test")


def _judge(name, url, **extra):
    return {"name": name, "backend": "local-chat-completions", "model": name, "base_url": url, **extra}


def test_each_failing_judge_gets_one_line_and_a_judge_that_answers_anything_passes(monkeypatch):
    monkeypatch.setenv("HEALTH_KEY", "sk-test-not-a-real-key-000")
    script = {
        ("key-refused", ""): [{"status": 401}],
        ("forbidden", ""): [{"status": 403}],
        ("no-such-model", ""): [{"status": 404}],
        ("bad-request", ""): [{"status": 400}],
        ("chatty", ""): [{"content": "OK! How can I help you today?"}],  # not a verdict: fine
        ("limited", ""): [{"status": 429, "headers": {"Retry-After": "0"}}],  # up, rate-limited: fine
        ("flaky", ""): [{"status": 503}],
    }  # one 5xx is retried once
    dead = closed_port_url()
    with FakeJudgeServer(script=script) as server:
        judges = [
            _judge("fine", server.url),
            _judge("key-refused", server.url, api_key_env="HEALTH_KEY"),
            _judge("forbidden", server.url),
            _judge("no-such-model", server.url),
            _judge("bad-request", server.url),
            _judge("chatty", server.url),
            _judge("limited", server.url),
            _judge("flaky", server.url),
            _judge("down", dead),
        ]
        problems = panel_problems(_panel(judges))
        asked = server.requests
    by_judge = {line.split(":", 1)[0]: line for line in problems}
    assert set(by_judge) == {
        "judge key-refused",
        "judge forbidden",
        "judge no-such-model",
        "judge bad-request",
        "judge down",
    }, problems
    assert (
        "HTTP 401 from 127.0.0.1:" in by_judge["judge key-refused"]
        and "$HEALTH_KEY was refused" in by_judge["judge key-refused"]
    )
    assert "HTTP 403" in by_judge["judge forbidden"] and "'forbidden'" in by_judge["judge forbidden"]
    assert (
        "no such endpoint or model" in by_judge["judge no-such-model"]
        and "'no-such-model'" in by_judge["judge no-such-model"]
    )
    assert "unknown model name" in by_judge["judge bad-request"]
    assert by_judge["judge down"].startswith("judge down: cannot connect to 127.0.0.1:")
    assert all(line.endswith("; --skip-judge-check skips this check") for line in problems)
    assert all("sk-test" not in line for line in problems)
    # one request per judge (the flaky one twice), each tiny: no answer, no question
    counts = {name: sum(1 for r in asked if r["model"] == name) for name in {r["model"] for r in asked}}
    assert counts == {
        "fine": 1,
        "key-refused": 1,
        "forbidden": 1,
        "no-such-model": 1,
        "bad-request": 1,
        "chatty": 1,
        "limited": 1,
        "flaky": 2,
    }
    assert all(r["turns"] == 1 and r["question"] == "" for r in asked)


def test_batch_judges_are_not_built_by_the_check():
    # an hf or vllm judge would load its model: the check leaves batch backends alone (lm-eval's "dummy"
    # is one that imports nothing heavy; building it would not fail either, so an empty list is the skip)
    assert panel_problems(_panel([{"name": "local", "backend": "dummy", "model": "/no/such/model"}])) == []


def test_medeval_judge_checks_the_panel_before_judging(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    doc = {"question": "q0", "answer": "Take with food.", "question_type": "Dose"}
    (folder / "samples_medicationqa_2026-01-01T00-00-00.jsonl").write_text(
        json.dumps({"doc_id": 0, "doc": doc, "resps": [["Take it with food."]], "filter": "scored"}) + "\n"
    )
    (folder / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": {"medicationqa": {}}}))
    dead = closed_port_url()
    code = main(["judge", str(folder), "--quiet", "--judge-model", "a", "--judge-model", "b", "--judge-base-url", dead])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 2 and all(line.startswith("medeval judge: error: judge ") for line in err)
    assert not list(folder.glob("judged_*.jsonl"))  # nothing was judged


def test_a_run_whose_judges_failed_says_how_to_re_judge_without_generating():
    results = {
        "results": {"medicationqa": {"judge_verdicts,scored": 0.0}},
        "samples": {"medicationqa": [{"judge_verdicts": {"b": {"scores": None, "unscored_reason": "HTTP 500"}}}]},
    }
    argv = [
        "--model",
        "hf",
        "--tasks",
        "medicationqa",
        "--output_path",
        "out dir",
        "--log_samples",
        "--judge-model",
        "b",
        "--judge-base-url",
        "http://h:8000/v1",
    ]
    code, reason = run_unscored_exit_code(results, run=read_command_line(argv))
    assert code == 3 and reason == (
        "judge(s) scored nothing: b (medicationqa). Fix them, then re-judge without "
        "generating again: medeval judge 'out dir' --judge-model b --judge-base-url "
        "http://h:8000/v1 (or pass --allow-unscored)."
    )
    # a panel given in --metadata is given to medeval judge as --judges
    panel = {"judges": [{"backend": "local-chat-completions", "model": "m", "base_url": "http://h/v1"}]}
    hint = rejudge_hint(read_command_line(["-o", "o", "-s", "--metadata", json.dumps({"medeval_judges": panel})]))
    assert hint == "re-judge without generating again: medeval judge o --judges '" + json.dumps(panel) + "'"
    # the line as lm-eval reads it (found by a review: --output, an abbreviation lm-eval accepts, was missed)
    hint = rejudge_hint(read_command_line(["--output", "o", "--log_samples", "--judge-model", "b"]))
    assert hint == "re-judge without generating again: medeval judge o --judge-model b"
    # without logged samples there is nothing to re-judge: say what to add next time
    assert "--output_path DIR --log_samples" in rejudge_hint(
        read_command_line(["--output_path", "o", "--judge-model", "b"])
    )


def medicationqa_and_a_model_that_cannot_load(tmp_path):
    data = tmp_path / "medicationqa.json"
    data.write_text(
        json.dumps([{"question": f"can i take drug{i} with food", "answer": "Yes, with food."} for i in range(3)])
    )
    # a folder the pre-run model check accepts (it has a config.json) but that holds no model: building it fails
    model = tmp_path / "not-a-model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    return data, model


@pytest.mark.e2e  # a `medeval run` subprocess
def test_medeval_run_with_dead_judges_fails_before_the_model_is_built(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    data, model = medicationqa_and_a_model_that_cannot_load(tmp_path)
    dead = closed_port_url()
    args = [
        "run",
        "--tasks",
        "medicationqa",
        "--model",
        "hf",
        "--model_args",
        f"pretrained={model}",
        "--judge-model",
        "a",
        "--judge-model",
        "b",
        "--judge-base-url",
        dead,
    ]
    env = {"MEDEVAL_MEDICATIONQA_PATH": str(data)}
    run = run_cli(args, cwd=tmp_path, env=env)
    assert run.returncode == 2, run.stderr[-3000:]
    errors = run.stderr.strip().splitlines()
    assert [line.split(":", 3)[2].strip() for line in errors] == ["judge a", "judge b"], errors
    assert all("cannot connect to 127.0.0.1:" in line for line in errors)
    # the model was never built: with the check skipped, building it is what fails
    skipped = run_cli([*args, "--skip-judge-check"], cwd=tmp_path, env=env)
    assert skipped.returncode != 0 and "not-a-model" in skipped.stderr
    assert "cannot connect" not in skipped.stderr


@pytest.mark.e2e  # medeval run's path in this process: lm-eval starts if the check lets the panel by
def test_a_panel_in_the_first_of_two_metadata_flags_is_checked_too(tmp_path, monkeypatch, capsys):
    # lm-eval merges repeated --metadata flags; the health check read only the last one and let a dead panel by
    from medeval_metrics.cli import run_lm_eval

    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    data, model = medicationqa_and_a_model_that_cannot_load(tmp_path)
    panel = {
        "judges": [{"name": "a", "backend": "local-chat-completions", "model": "a", "base_url": closed_port_url()}]
    }
    code = run_lm_eval(
        [
            "--tasks",
            "medicationqa",
            "--model",
            "hf",
            "--model_args",
            f"pretrained={model}",
            "--metadata",
            json.dumps({"medeval_judges": panel}),
            "--metadata",
            json.dumps({"medicationqa_path": str(data)}),
        ]
    )
    assert code == 2
    assert "cannot connect to 127.0.0.1:" in capsys.readouterr().err
