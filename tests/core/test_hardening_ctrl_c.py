"""Ctrl-C anywhere in the CLI ends with exit 130 and one line saying what was kept and how to go on, never a
traceback (issue 32: `medeval judge` printed three chained tracebacks, `medeval emrqa-prepare` one)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_medeval

from medeval_metrics import cli


@pytest.fixture
def no_hard_exit(monkeypatch):
    """In this process a Ctrl-C must not end pytest: the exit for busy worker threads is recorded instead."""
    calls: list[int] = []
    monkeypatch.setattr(cli, "_exit_now_if_workers_remain", calls.append)
    return calls


def _interrupt(*args, **kwargs):
    raise KeyboardInterrupt


# `python -m medeval_metrics.cli ARGS` with Python's own Ctrl-C handler: a test run started in the background
# (`cmd &` without job control) ignores SIGINT, and a Python child keeps an ignored SIGINT ignored
_MEDEVAL_WITH_CTRL_C = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'medeval'; runpy.run_module('medeval_metrics.cli', run_name='__main__', alter_sys=True)"
)


def _one_line(proc) -> str:
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "KeyboardInterrupt" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


def test_ctrl_c_in_medeval_judge_names_the_cache_that_keeps_the_verdicts(tmp_path, monkeypatch, capsys, no_hard_exit):
    from medeval_metrics.judge import cli as judge_cli

    cache = tmp_path / "verdicts.sqlite"
    panel = {"judges": [{"name": "a", "backend": "local-chat-completions", "model": "a", "base_url": "http://127.0.0.1:9/v1"}],
             "cache": str(cache)}  # fmt: skip
    monkeypatch.setattr(judge_cli, "judge_output", _interrupt)
    args = ["judge", str(tmp_path), "--judges", json.dumps(panel), "--skip-judge-check"]
    line = _one_line(run_medeval(args, capsys))
    assert line == (
        f"medeval judge: interrupted; the verdicts received so far are kept in the judge cache {cache}; a task's "
        "judged files are written only when it is judged whole. Run the same command again: only the verdicts the "
        "cache lacks are asked for."
    )
    assert no_hard_exit == [130]
    panel["cache"] = None
    line = _one_line(run_medeval([*args[:3], json.dumps(panel), "--skip-judge-check"], capsys))
    assert 'the panel has no "cache", so the verdicts received were not kept' in line


def test_ctrl_c_in_emrqa_prepare_says_the_unfinished_preparation_was_removed(
    tmp_path, monkeypatch, capsys, no_hard_exit
):
    from medeval_metrics.emrqa import cli as emrqa_cli
    from medeval_metrics.emrqa.synthetic import write_synthetic

    data = write_synthetic(tmp_path / "data", notes_per_subset=2, questions_per_note=2)
    monkeypatch.setattr(emrqa_cli, "prepare", _interrupt)
    args = ["emrqa-prepare", "--data-json", str(data.data_json), "--data-ql-csv", str(data.data_ql_csv)]
    line = _one_line(run_medeval([*args, "--cache-dir", str(tmp_path / "cache")], capsys))
    assert line.startswith("medeval emrqa-prepare: interrupted; the unfinished preparation was removed")
    assert line.endswith("Run the same command again to prepare from the start.")


@pytest.mark.parametrize("command", [["list"], ["report", "nowhere", "--output", "out"], ["breakdown", "nowhere"]])
def test_ctrl_c_in_any_other_command_is_one_line(command, monkeypatch, capsys, no_hard_exit):
    parser = cli.build_parser()
    args = parser.parse_args(command)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    monkeypatch.setattr(args, "func", _interrupt, raising=False)
    monkeypatch.setattr(parser, "parse_args", lambda argv: args)
    line = _one_line(run_medeval(command, capsys))
    assert line == f"medeval {command[0]}: interrupted; {cli._NOTHING_HALF_WRITTEN}"


def test_ctrl_c_while_medeval_run_reads_its_command_line_is_one_line(monkeypatch, capsys, no_hard_exit):
    monkeypatch.setattr("medeval_metrics.preflight.read_command_line", _interrupt)
    line = _one_line(run_medeval(["run", "--tasks", "emsqa_public"], capsys))
    assert line.startswith("medeval run: interrupted; ")


@pytest.mark.e2e  # subprocess, sent SIGINT while its judge requests wait on a slow loopback judge
def test_sigint_to_medeval_judge_is_exit_130_and_one_line(tmp_path):
    from conftest import run_cli

    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    rows = [{"question": f"can i take drug{i} with food", "focus_drug": f"drug{i}", "question_type": "Dose",
             "answer": "With food.", "section_title": "Use", "url": "https://example.org"} for i in range(4)]  # fmt: skip
    data, table, out = tmp_path / "m.json", tmp_path / "table.json", tmp_path / "out"
    data.write_text(json.dumps(rows))
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": "Take it with food."}))
    with FakeJudgeServer() as server:
        panel = {"judges": [{"name": "a", "backend": "local-chat-completions", "model": "a", "base_url": server.url}],
                 "cache": str(tmp_path / "run.sqlite")}  # fmt: skip
        run = run_cli(
            ["run", "--tasks", "medicationqa", "--model", "medeval-scripted", "--model_args", f"table={table}",
             "--output_path", str(out), "--log_samples",
             "--metadata", json.dumps({"medicationqa_path": str(data), "medeval_judges": panel})],
            cwd=tmp_path, timeout=300,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr[-3000:]
    with FakeJudgeServer(latency=60) as slow:
        cache = tmp_path / "slow.sqlite"
        panel = {"judges": [{"name": "b", "backend": "local-chat-completions", "model": "b", "base_url": slow.url}],
                 "cache": str(cache)}  # fmt: skip
        child = subprocess.Popen(
            [sys.executable, "-c", _MEDEVAL_WITH_CTRL_C, "judge", str(out), "--judges", json.dumps(panel),
             "--skip-judge-check", "--quiet"],
            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.time() + 120
        while slow.count() == 0 and time.time() < deadline and child.poll() is None:
            time.sleep(0.1)
        assert slow.count() > 0, "the judge was never asked"
        child.send_signal(signal.SIGINT)
        try:
            _, err = child.communicate(timeout=30)  # well under one 60 s judge request
        except subprocess.TimeoutExpired:
            child.kill()
            pytest.fail("Ctrl-C did not end medeval judge")
    proc = type("Proc", (), {"returncode": child.returncode, "stderr": err})
    line = _one_line(proc)
    assert line.startswith(
        f"medeval judge: interrupted; the verdicts received so far are kept in the judge cache {cache}"
    )


@pytest.mark.e2e  # subprocess, sent SIGINT while it prepares a large synthetic emrQA
def test_sigint_to_emrqa_prepare_is_exit_130_one_line_and_leaves_nothing_behind(tmp_path):
    from medeval_metrics.emrqa.synthetic import write_synthetic

    info = write_synthetic(
        tmp_path / "data", notes_per_subset=120, questions_per_note=40, lines_per_note=40, max_ql_rows=60_000
    )
    cache = tmp_path / "cache"
    child = subprocess.Popen(
        [sys.executable, "-c", _MEDEVAL_WITH_CTRL_C, "emrqa-prepare", "--data-json", str(info.data_json),
         "--data-ql-csv", str(info.data_ql_csv), "--cache-dir", str(cache)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.time() + 120
    started: list[Path] = []
    while time.time() < deadline and not started and child.poll() is None:
        started = [p for p in cache.glob(".prep-*") if (p / "notes.jsonl").exists()] if cache.exists() else []
        time.sleep(0.05)
    assert started, "the preparation finished before it could be interrupted"
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    proc = type("Proc", (), {"returncode": child.returncode, "stderr": err})
    assert _one_line(proc).startswith("medeval emrqa-prepare: interrupted; the unfinished preparation was removed")
    assert list(cache.iterdir()) == []  # the work folder is gone; nothing half-prepared is left to trust
