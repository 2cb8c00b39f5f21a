"""Files holding note text, private questions, answers or verdicts are 0600 in folders the pack creates 0700, under
the usual umask 022 (issue 32); a cache another user owns is one line naming the folder and the fix."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from pathlib import Path

import pytest
from conftest import run_medeval

from medeval_metrics.data import MedevalDataError
from medeval_metrics.safe_files import atomic_write_bytes, atomic_write_text, create_private_file, private_folder


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask_022():
    """The default umask of most systems, under which a plain ``open`` makes files 0644 in 0755 folders."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def test_a_private_file_is_0600_in_new_folders_0700_whatever_the_umask(tmp_path, umask_022):
    target = tmp_path / "a" / "b" / "verdicts.jsonl"
    atomic_write_text(target, "note text\n", private=True)
    assert mode(target) == 0o600 and mode(tmp_path / "a") == 0o700 and mode(tmp_path / "a" / "b") == 0o700
    public = tmp_path / "c" / "card.md"
    atomic_write_text(public, "scores\n")
    assert mode(public) == 0o644 and mode(tmp_path / "c") == 0o755  # files without private text: as before


def test_a_private_file_replacing_a_world_readable_one_is_0600(tmp_path, umask_022):
    target = tmp_path / "report.html"
    target.write_text("old")
    target.chmod(0o644)
    atomic_write_bytes(target, b"new", private=True)
    assert mode(target) == 0o600 and target.read_bytes() == b"new"


def test_an_existing_folder_keeps_its_mode(tmp_path, umask_022):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    private_folder(shared / "mine")
    assert mode(shared) == 0o755 and mode(shared / "mine") == 0o700


def test_a_private_database_and_its_wal_files_are_0600(tmp_path, umask_022):
    database = tmp_path / "cache" / "judge.sqlite"
    assert create_private_file(database) and not create_private_file(database)
    with sqlite3.connect(database) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x)")
        conn.execute("INSERT INTO t VALUES ('verdict')")
        files = sorted(p.name for p in database.parent.iterdir())
        assert {"judge.sqlite", "judge.sqlite-wal", "judge.sqlite-shm"} <= set(files)
        assert {mode(database.parent / name) for name in files} == {0o600}
    assert mode(database.parent) == 0o700


def test_create_private_file_never_follows_a_planted_link(tmp_path, umask_022):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("keep")
    (tmp_path / "db").symlink_to(elsewhere)
    assert not create_private_file(tmp_path / "db") and elsewhere.read_text() == "keep"


def _emrqa_meta(tmp_path):
    from medeval_metrics.emrqa.synthetic import write_synthetic

    data = write_synthetic(tmp_path / "data", notes_per_subset=2, questions_per_note=3)
    return {
        "emrqa_data_json": str(data.data_json),
        "emrqa_data_ql_csv": str(data.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path / "cache" / "emrqa"),
    }


def test_the_emrqa_cache_is_0600_files_in_0700_folders(tmp_path, umask_022):
    from medeval_metrics.emrqa.cache import ensure_prepared

    meta = _emrqa_meta(tmp_path)
    folder, _ = ensure_prepared(meta, log=lambda _: None)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files and {mode(p) for p in files} == {0o600}  # before: 0644 (only the folder's 0700 kept them in)
    assert {mode(p) for p in (folder, folder.parent, folder.parent.parent)} == {0o700}


@pytest.mark.parametrize("command", ["api", "cli"])
def test_an_emrqa_cache_of_another_user_is_one_line_naming_the_folder_and_the_fix(
    tmp_path, monkeypatch, capsys, command
):
    from medeval_metrics.emrqa import cache

    meta = _emrqa_meta(tmp_path)
    root = Path(meta["emrqa_cache_dir"])
    real_exists = Path.exists

    def exists(self):  # as os.stat answers in another user's 0700 folder
        if root in self.parents:
            raise PermissionError(13, "Permission denied", str(self))
        return real_exists(self)

    monkeypatch.setattr(Path, "exists", exists)
    if command == "api":
        with pytest.raises(MedevalDataError) as caught:  # before: PermissionError, a traceback
            cache.ensure_prepared(meta, log=lambda _: None)
        message = str(caught.value)
    else:
        args = ["emrqa-prepare", "--data-json", meta["emrqa_data_json"], "--data-ql-csv", meta["emrqa_data_ql_csv"]]
        proc = run_medeval([*args, "--cache-dir", str(root)], capsys)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        [message] = proc.stderr.strip().splitlines()
    assert f"cannot use the emrQA cache folder {root} (Permission denied" in message
    assert "MEDEVAL_EMRQA_CACHE_DIR" in message and "\n" not in message


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_emrqa_cache_folder_for_real(tmp_path):
    from medeval_metrics.emrqa.cache import ensure_prepared

    meta = _emrqa_meta(tmp_path)
    root = Path(meta["emrqa_cache_dir"])
    root.mkdir(parents=True)
    root.chmod(0)
    try:
        with pytest.raises(MedevalDataError, match="cannot use the emrQA cache folder"):
            ensure_prepared(meta, log=lambda _: None)
    finally:
        root.chmod(0o700)


def test_a_judge_cache_in_a_folder_of_another_user_is_one_line(tmp_path, monkeypatch):
    from medeval_metrics.judge import config

    cache = tmp_path / "theirs" / "judge.sqlite"
    real_is_dir = Path.is_dir

    def is_dir(self):
        if self == cache:
            raise PermissionError(13, "Permission denied", str(self))
        return real_is_dir(self)

    monkeypatch.setattr(Path, "is_dir", is_dir)
    problem = config._cache_problem(str(cache))  # before: PermissionError out of the panel check
    assert problem.startswith(f"cache {cache} cannot be used (Permission denied)") and '"cache" path' in problem


def test_the_judge_cache_folder_is_made_0700(tmp_path, umask_022):
    from medeval_metrics.judge import config

    assert config._cache_problem(str(tmp_path / "new" / "judge.sqlite")) is None
    assert mode(tmp_path / "new") == 0o700


def test_medeval_run_holds_umask_077_and_puts_the_caller_s_back(umask_022):
    from medeval_metrics import cli

    with cli._files_private_to_the_user():
        assert os.umask(0o077) == 0o077
    assert os.umask(0o022) == 0o022


@pytest.mark.e2e  # lm-eval (scripted model) in this process
def test_medeval_run_writes_results_samples_and_its_response_cache_0600_in_0700_folders(tmp_path, capsys, umask_022):
    from conftest import FIXTURES

    table = tmp_path / "answers.json"
    table.write_text(json.dumps({"key": "question", "default": "A"}))
    out = tmp_path / "out"
    proc = run_medeval(
        ["run", "--model", "medeval-scripted", "--model_args", f"table={table}", "--tasks", "emsqa_private",
         "--limit", "3", "--metadata", json.dumps({"emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json")}),
         "--output_path", str(out), "--log_samples", "--use_cache", str(tmp_path / "responses" / "lm")],
        capsys,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    written = [p for p in out.rglob("*") if p.is_file()]
    names = {p.name.split("_")[0] for p in written}
    assert {"results", "samples"} <= names
    assert {mode(p) for p in written} == {0o600}  # before: 0644 under umask 022
    assert {mode(p) for p in out.rglob("*") if p.is_dir()} | {mode(out)} == {0o700}
    responses = list((tmp_path / "responses").iterdir())
    assert responses and {mode(p) for p in responses} == {0o600} and mode(tmp_path / "responses") == 0o700
    assert os.umask(0o022) == 0o022  # the caller's umask is back
