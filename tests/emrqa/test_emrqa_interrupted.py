"""emrQA preparation interrupted or failing leaves nothing behind; progress bars; the --write_out warning (issues 12, 13)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from medeval_metrics.emrqa import splits
from medeval_metrics.emrqa.jsonstream import iter_notes
from medeval_metrics.emrqa.ql_csv import read_ql_csv
from medeval_metrics.emrqa.synthetic import write_synthetic


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return write_synthetic(tmp_path_factory.mktemp("emrqa-small"), notes_per_subset=3, questions_per_note=4)


@pytest.mark.parametrize("failure", [RuntimeError("disk full"), KeyboardInterrupt()])
def test_a_failing_preparation_removes_its_partial_folder(small, tmp_path, monkeypatch, failure):
    def broken(*args, **kwargs):
        raise failure

    monkeypatch.setattr(splits, "_prepare_emrql", broken)  # fails after notes.jsonl and the QA splits are written
    with pytest.raises(type(failure)):
        splits.prepare(small.data_json, small.data_ql_csv, tmp_path / "cache" / "abc", log=lambda _: None)
    assert list((tmp_path / "cache").iterdir()) == []


def _dead_pid() -> int:
    pid = 2**22 + 12_345  # above Linux's largest pid_max: no such process
    assert not splits._process_alive(pid)
    return pid


def test_the_next_start_removes_folders_left_by_killed_preparations(small, tmp_path):
    cache = tmp_path / "cache"
    host = socket.gethostname()
    folders = {
        "dead": cache / f".prep-{host}-{_dead_pid()}-abc123",
        "running": cache / f".prep-{host}-{os.getpid()}-def456",  # a live preparation: never touched
        "other_host": cache / f".prep-elsewhere-{_dead_pid()}-ghi789",  # its pid means nothing here
        "legacy_old": cache / ".prep-x1y2z3",
        "legacy_new": cache / ".prep-q9w8e7",
    }
    for folder in folders.values():
        folder.mkdir(parents=True)
        (folder / "notes.jsonl").write_text("partial\n", encoding="utf-8")
    seven_hours_ago = time.time() - 7 * 3600
    os.utime(folders["legacy_old"], (seven_hours_ago, seven_hours_ago))
    messages: list[str] = []
    splits.prepare(small.data_json, small.data_ql_csv, cache / "abc", log=messages.append)
    left = {path.name for path in cache.iterdir()}
    assert left == {"abc", folders["running"].name, folders["other_host"].name, folders["legacy_new"].name}
    assert sum("left by an interrupted preparation" in m for m in messages) == 2


def test_progress_callbacks_reach_the_file_size(small):
    seen: list[int] = []
    assert sum(1 for _ in iter_notes(small.data_json, seen.append)) == sum(small.notes.values())
    assert seen == sorted(seen) and seen[-1] == small.data_json.stat().st_size
    seen.clear()
    assert sum(1 for _ in read_ql_csv(small.data_ql_csv, progress=seen.append)) > 0
    assert seen[-1] == small.data_ql_csv.stat().st_size


def test_progress_bars_name_both_files_and_reach_their_size(small, tmp_path, capsys, monkeypatch):
    bars = []
    original = splits._bar
    monkeypatch.setattr(splits, "_bar", lambda *args: bars.append(original(*args)) or bars[-1])
    splits.prepare(small.data_json, small.data_ql_csv, tmp_path / "out", log=lambda _: None, progress=True)
    err = capsys.readouterr().err
    assert "emrQA data.json" in err and "emrQA data-ql.csv" in err
    assert [(bar.n, bar.total) for bar in bars] == [
        (small.data_json.stat().st_size,) * 2,
        (small.data_ql_csv.stat().st_size,) * 2,
    ]
    splits.prepare(small.data_json, small.data_ql_csv, tmp_path / "quiet", log=lambda _: None, progress=False)
    assert "emrQA" not in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["run", "--tasks", "emrqa_risk", "--write_out"], True),
        (["--tasks", "emrqa_risk", "-w", "--limit", "2"], True),
        (["--tasks", "emrqa_risk", "--log_samples", "--output_path", "out"], False),
        (["--tasks", "emrqa_risk", "--wandb_args", "project=write_out"], False),  # a value, not the flag
    ],
)
def test_write_out_is_recognised_on_the_command_line(argv, expected):
    from medeval_metrics.emrqa.tasks import writes_out

    assert writes_out(argv) is expected


def test_note_task_loaders_warn_once_that_write_out_shows_note_text(small, tmp_path, monkeypatch, caplog):
    from medeval_metrics.emrqa import tasks, write_out

    meta = {
        "emrqa_data_json": str(small.data_json),
        "emrqa_data_ql_csv": str(small.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path / "cache"),
        "emrqa_sample_size": 2,
    }
    write_out.warn_write_out.cache_clear()
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--tasks", "emrqa", "--limit", "2"])
    with caplog.at_level(logging.WARNING, logger="medeval.emrqa"):
        tasks.load_evidence("risk", **meta)
    assert tasks.WRITE_OUT_WARNING not in caplog.text
    monkeypatch.setattr(sys, "argv", ["lm_eval", "--tasks", "emrqa", "--write_out"])
    with caplog.at_level(logging.WARNING, logger="medeval.emrqa"):
        tasks.load_evidence("risk", **meta)
        tasks.load_evidence("medication", **meta)
    assert caplog.text.count("--write_out prints whole prompts") == 1 and "patient-note text" in caplog.text
    write_out.warn_write_out.cache_clear()


@pytest.mark.e2e
def test_killed_emrqa_prepare_leaves_nothing_behind(tmp_path):
    info = write_synthetic(
        tmp_path / "data", notes_per_subset=120, questions_per_note=40, lines_per_note=40, max_ql_rows=60_000
    )
    cache = tmp_path / "cache"
    command = [
        sys.executable,
        "-m",
        "medeval_metrics.cli",
        "emrqa-prepare",
        "--data-json",
        str(info.data_json),
        "--data-ql-csv",
        str(info.data_ql_csv),
        "--cache-dir",
        str(cache),
    ]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    partial: list[Path] = []
    while time.time() < deadline and not partial:  # kill it as soon as it has started writing
        partial = [p for p in cache.glob(".prep-*") if (p / "notes.jsonl").exists()] if cache.exists() else []
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert partial and partial[0].exists(), "the preparation finished before it could be killed"
    assert not any(p.name != partial[0].name for p in cache.iterdir())  # only the partial folder: nothing usable
    again = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert "left by an interrupted preparation" in again.stdout
    left = [p.name for p in cache.iterdir()]
    assert len(left) == 1 and not left[0].startswith(".prep-") and (cache / left[0] / "manifest.json").exists()
