"""A judge cache that cannot be written (locked past SQLite's busy timeout, a full disk) never costs the
run its results or its paid verdicts: retried, then one warning and exit status 4 (issue 22, item 3)."""

from __future__ import annotations

import json
import logging
import sqlite3

import pytest

from medeval_metrics.judge import cache as cache_module
from medeval_metrics.judge import runner as runner_module
from medeval_metrics.judge.config import panel_from_obj
from medeval_metrics.judge.runner import JudgeItem, PanelRunner
from medeval_metrics.medicationqa import RUBRIC
from medeval_metrics.testing.fake_judge import FakeJudgeServer

ITEMS = [JudgeItem(f"q{i}", "r", "a") for i in range(5)]


def _panel(server, cache_path):
    return panel_from_obj(
        {
            "judges": [{"name": "j", "backend": "local-chat-completions", "model": "m", "base_url": server.url}],
            "cache": str(cache_path),
            "backoff_base": 0.001,
            "backoff_max": 0.001,
        },
        "t",
    )


@pytest.fixture(autouse=True)
def _no_failures_left():
    getattr(runner_module, "cache_failures", []).clear()
    yield
    getattr(runner_module, "cache_failures", []).clear()


def test_a_cache_locked_by_another_process_is_retried_then_the_run_goes_on(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.05, raising=False)
    cache_path = tmp_path / "judge_cache.sqlite"
    waits: list[float] = []
    with FakeJudgeServer() as server:
        runner = PanelRunner(_panel(server, cache_path), RUBRIC, sleep=waits.append)
        holder = sqlite3.connect(cache_path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")  # another process holds the write lock for the whole run
        try:
            with caplog.at_level(logging.WARNING, logger="medeval.judge"):
                out = runner.judge(ITEMS, progress=False)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
    assert all(row["j"]["scores"] for row in out)  # every verdict paid for is in the results
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "5 verdicts could not be stored" in warnings[0] and "locked" in warnings[0]
    assert runner_module.cache_failures == [
        f"{cache_path}: 5 verdicts not stored (OperationalError: database is locked)"
    ]
    assert waits.count(runner_module.CACHE_RETRY_S) == 1 and 2 * runner_module.CACHE_RETRY_S in waits  # retried
    # the lock gone, the next run stores what it asks
    with FakeJudgeServer() as server:
        PanelRunner(_panel(server, cache_path), RUBRIC, sleep=waits.append).judge(ITEMS, progress=False)
    assert len(cache_module.VerdictCache(cache_path)) == 5


def test_a_full_disk_under_the_cache_is_retried_and_kept_until_the_end(tmp_path, monkeypatch, caplog):
    calls = []

    def disk_full(self, rows, owner=None):
        calls.append(len(list(rows)))
        if len(calls) <= runner_module.CACHE_WRITE_ATTEMPTS:
            raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(cache_module.VerdictCache, "put_many", disk_full)
    with FakeJudgeServer() as server:
        out = PanelRunner(_panel(server, tmp_path / "c.sqlite"), RUBRIC, sleep=lambda s: None).judge(
            ITEMS, progress=False
        )
    assert all(row["j"]["scores"] for row in out)
    assert calls[-1] == 5  # the last try at the end stores every verdict held back: no warning
    assert runner_module.cache_failures == []


def test_medeval_judge_exits_4_with_one_line_when_the_cache_was_not_updated(tmp_path, monkeypatch, capsys):
    from medeval_metrics.cli import main

    def disk_full(self, rows, owner=None):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(cache_module.VerdictCache, "put_many", disk_full)
    monkeypatch.setattr(runner_module, "CACHE_RETRY_S", 0.001)
    run = tmp_path / "run"
    run.mkdir()
    with (run / "samples_medicationqa_2026-01-01T00-00-00.jsonl").open("w") as handle:
        for i in range(3):
            doc = {"question": f"q{i}", "answer": "Take with food.", "question_type": "Dose"}
            handle.write(
                json.dumps({"doc_id": i, "doc": doc, "resps": [["Take it with food."]], "filter": "scored"}) + "\n"
            )
    (run / "results_2026-01-01T00-00-00.json").write_text(json.dumps({"results": {"medicationqa": {}}}))
    with FakeJudgeServer() as server:
        judges = {
            "judges": [{"name": "j", "backend": "local-chat-completions", "model": "m", "base_url": server.url}],
            "cache": str(tmp_path / "c.sqlite"),
            "backoff_base": 0.001,
            "backoff_max": 0.001,
        }
        code = main(["judge", str(run), "--quiet", "--judges", json.dumps(judges)])
    err = capsys.readouterr().err
    assert code == 4
    expected = (
        f"medeval judge: warning: the judge cache was not fully updated ({tmp_path / 'c.sqlite'}: 3 verdicts "
        "not stored (OperationalError: database or disk is full)); the results are written and hold every "
        "verdict."
    )
    assert [line for line in err.splitlines() if line.startswith("medeval judge:")] == [expected]
    (judged,) = run.glob("*_judged.json")
    assert json.loads(judged.read_text())["medeval_judge"]["medicationqa"]["items_scored"] == 3


@pytest.mark.e2e
def test_medeval_run_writes_its_results_and_exits_4_when_the_judge_cache_cannot_be_written(
    tmp_path, monkeypatch, capsys
):
    from conftest import find_results, run_medeval

    def locked(self, rows, owner=None):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(cache_module.VerdictCache, "put_many", locked)
    monkeypatch.setattr(runner_module, "CACHE_RETRY_S", 0.001)
    rows = [
        {
            "question": f"can i take drug{i} with food",
            "focus_drug": f"drug{i}",
            "question_type": "Usage",
            "answer": f"Drug{i} can be taken with or without food.",
            "section_title": "How to use",
            "url": f"https://example.org/{i}",
        }
        for i in range(3)
    ]
    (tmp_path / "medicationqa.json").write_text(json.dumps(rows))
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": "Take it with food."}))
    with FakeJudgeServer() as server:
        judges = {
            "judges": [{"name": "a", "backend": "local-chat-completions", "model": "judge-a", "base_url": server.url}],
            "cache": str(tmp_path / "verdicts.sqlite"),
        }
        metadata = {"medicationqa_path": str(tmp_path / "medicationqa.json"), "medeval_judges": json.dumps(judges)}
        out = run_medeval(
            [
                "run",
                "--model",
                "medeval-scripted",
                "--model_args",
                f"table={table}",
                "--tasks",
                "medicationqa",
                "--metadata",
                json.dumps(metadata),
                "--output_path",
                str(tmp_path / "out"),
                "--log_samples",
            ],
            capsys,
            monkeypatch,
        )
    assert out.returncode == 4, out.stderr[-3000:]
    assert "medeval: warning: the judge cache was not fully updated" in out.stderr
    assert "3 verdicts not stored (OperationalError: database is locked)" in out.stderr
    results, samples = find_results(tmp_path / "out")
    from medeval_metrics.judge.aggregate import success_by_judge

    # every verdict paid for is counted (per-judge success: from the samples' verdicts, task version 5)
    assert success_by_judge([s["judge_verdicts"] for s in samples["medicationqa"]])["a"]["value"] == 1.0
    assert len(samples["medicationqa"]) == 3
