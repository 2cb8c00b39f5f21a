"""Files the pack writes: whole or not at all, never through a planted link (issue 22, items 1 and 4)."""

import os
import resource
import subprocess
import sys
import textwrap

import pytest

from medeval_metrics.data import MedevalDataError
from medeval_metrics.report.model_card import CARD_START, update_card

CARD = "---\nlicense: mit\n---\n\n# A model\n"


def emsqa_result(value):
    from huggingface_hub import EvalResult

    return EvalResult(
        task_type="multiple-choice",
        task_name="emsqa_public",
        dataset_type="Xueren/EMS-MCQA",
        dataset_name="EMSQA (emsqa_public)",
        dataset_split="test",
        metric_type="accuracy",
        metric_value=value,
    )


def repository(tmp_path):
    repo = tmp_path / "model-repo"
    (repo / ".git").mkdir(parents=True)
    return repo


# --- item 1: the model card and links ------------------------------------------------------------


def test_a_link_planted_at_the_old_temporary_name_is_not_followed(tmp_path):
    """Today's code wrote through `.README.md.medeval-partial`: a link there sent the card to its target."""
    repo = repository(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's own file\n")
    card = repo / "README.md"
    card.write_text(CARD)
    (repo / ".README.md.medeval-partial").symlink_to(victim)
    assert update_card(card, "m", [emsqa_result(0.5)], "## medeval\n\nscores") is True
    assert victim.read_text() == "the user's own file\n"
    assert CARD_START in card.read_text() and not card.is_symlink()


def test_a_link_planted_at_the_next_temporary_name_is_refused_and_another_name_used(tmp_path, monkeypatch):
    from medeval_metrics import safe_files

    names = iter(["planted", "fresh"])
    monkeypatch.setattr(safe_files.secrets, "token_hex", lambda n: next(names))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = tmp_path / "out.json"
    (tmp_path / ".out.json.planted.tmp").symlink_to(victim)
    safe_files.atomic_write_text(target, '{"a": 1}\n')
    assert victim.read_text() == "keep me\n"
    assert target.read_text() == '{"a": 1}\n'
    assert not (tmp_path / ".out.json.fresh.tmp").exists()


def test_a_card_that_links_outside_its_repository_is_refused(tmp_path, capsys):
    repo = repository(tmp_path)
    outside = tmp_path / "home-notes.txt"
    outside.write_text("private notes, never to be pushed\n")
    card = repo / "README.md"
    card.symlink_to(outside)
    with pytest.raises(MedevalDataError, match=r"README.md: the card is a link to .*home-notes.txt.*refusing"):
        update_card(card, "m", [emsqa_result(0.5)], "## medeval\n\nscores")
    assert outside.read_text() == "private notes, never to be pushed\n"
    assert card.is_symlink() and os.readlink(card) == str(outside)


def test_a_card_that_links_inside_its_repository_updates_the_target_and_says_so(tmp_path, capsys):
    repo = repository(tmp_path)
    (repo / "docs").mkdir()
    target = repo / "docs" / "card.md"
    target.write_text(CARD)
    card = repo / "README.md"
    card.symlink_to("docs/card.md")
    assert update_card(card, "m", [emsqa_result(0.5)], "## medeval\n\nscores") is True
    assert card.is_symlink() and os.readlink(card) == "docs/card.md"
    assert CARD_START in target.read_text() and target.read_text().startswith("---\nlicense: mit\n")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is a link; updating its target" in err and "docs/card.md" in err


def test_the_card_keeps_its_permissions(tmp_path):
    card = repository(tmp_path) / "README.md"
    card.write_text(CARD)
    card.chmod(0o640)
    update_card(card, "m", [emsqa_result(0.5)], "## medeval\n\nscores")
    assert (card.stat().st_mode & 0o777) == 0o640


# --- item 4: a full disk ------------------------------------------------------------------------


def _limited(code: str, limit: int, cwd) -> subprocess.CompletedProcess:
    """Run ``code`` in a Python whose files can grow to ``limit`` bytes (RLIMIT_FSIZE: a full disk)."""

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        preexec_fn=cap,
        timeout=120,
    )


@pytest.mark.e2e
def test_a_full_disk_is_an_error_naming_the_file_and_leaves_nothing_partial(tmp_path):
    (tmp_path / "old.json").write_text('{"kept": true}\n')
    done = _limited(
        """
        from medeval_metrics.safe_files import MedevalWriteError, atomic_write_text
        try:
            atomic_write_text("old.json", "x" * 100_000)
        except MedevalWriteError as exc:
            print("ERROR", exc)
        """,
        4096,
        tmp_path,
    )
    assert done.stdout.startswith("ERROR could not write old.json (File too large)"), done.stdout + done.stderr
    assert (tmp_path / "old.json").read_text() == '{"kept": true}\n'  # the old file as it was
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.json"]  # no temporary left behind


class _DiskFills:
    """A file object that takes ``room`` bytes, then fails as a full disk does (a fake of ENOSPC)."""

    def __init__(self, handle, room: int) -> None:
        self.handle, self.room = handle, room

    def write(self, data):
        import errno

        if len(data) > self.room:
            self.handle.write(data[: self.room])
            self.room = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.handle.write(data)

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return self.handle.__exit__(*exc)


def _tracker(tmp_path):
    from lm_eval.loggers.evaluation_tracker import EvaluationTracker

    tracker = EvaluationTracker(output_path=str(tmp_path / "out"))
    tracker.general_config_tracker.model_name_sanitized = "model"
    return tracker


def test_lm_eval_still_swallows_a_failed_results_write_and_leaves_it_cut(tmp_path, monkeypatch):
    """Why `medeval run` checks lm-eval's files after the run (``cli.cut_outputs``): lm-eval 0.4.13's own writer
    leaves a truncated results file and raises nothing on a full disk."""
    import pathlib

    real_write_text = pathlib.Path.write_text

    def full_disk(self, data, *args, **kwargs):
        real_write_text(self, data[:100], *args, **kwargs)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pathlib.Path, "write_text", full_disk)
    _tracker(tmp_path).save_results_aggregated({"results": {"t": {"acc": 0.5}}, "padding": "x" * 1000})  # no error
    (written,) = (tmp_path / "out" / "model").glob("results_*.json")
    assert len(written.read_text()) == 100  # cut short, left in place


def test_a_cut_results_or_samples_file_of_the_run_is_named_and_removed(tmp_path):
    import time

    from medeval_metrics import cli
    from medeval_metrics.preflight import read_command_line

    started = time.time()
    folder = tmp_path / "out" / "model"
    folder.mkdir(parents=True)
    whole = folder / "results_2026-01-01T00-00-00.json"
    whole.write_text('{"results": {}}')
    cut_results = folder / "results_2026-01-01T00-00-01.json"
    cut_results.write_text('{"results": {"t": {"acc')
    cut_samples = folder / "samples_t_2026-01-01T00-00-01.jsonl"
    cut_samples.write_text('{"doc_id": 0}\n{"doc_id": 1, "resps": [["a')
    settings = read_command_line(["--output_path", str(tmp_path / "out"), "--log_samples"])
    problems = cli.cut_outputs(settings, started)
    assert [p.split(":")[0] for p in problems] == [f"could not write {cut_results}", f"could not write {cut_samples}"]
    assert sorted(p.name for p in folder.iterdir()) == [whole.name]  # no later step reads half a file
    assert cli.cut_outputs(read_command_line(["--tasks", "t"]), started) == []  # no --output_path: nothing to check


def test_a_cut_sample_log_is_a_clear_error_not_a_traceback(tmp_path):
    from medeval_metrics.breakdown import read_samples

    log = tmp_path / "samples_emsqa_private_2026.jsonl"
    log.write_text('{"doc_id": 0}\n{"doc_id": 1, "resps": [["unterminat')
    with pytest.raises(MedevalDataError, match=r"samples_emsqa_private_2026.jsonl: line 2 is not a JSON record"):
        read_samples(log)


@pytest.mark.e2e
def test_medeval_run_on_a_full_disk_exits_non_zero_naming_the_file_and_writes_nothing_partial(tmp_path):
    import json

    from conftest import EMSQA_SYNTHETIC

    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": '["a"]'}))
    env = {**os.environ, "MEDEVAL_DATASET_CACHE": str(tmp_path / "cache"), "HF_DATASETS_CACHE": str(tmp_path / "hf")}
    script = "import sys; from medeval_metrics.cli import main; sys.exit(main(sys.argv[1:]))"

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))  # the results file (about 10 KB) does not fit

    done = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            "run",
            "--model",
            "medeval-scripted",
            "--model_args",
            f"table={table}",
            "--tasks",
            "emsqa_private",
            "--metadata",
            json.dumps({"emsqa_private_path": str(EMSQA_SYNTHETIC)}),
            "--output_path",
            str(tmp_path / "out"),
            "--log_samples",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=300,
        check=False,
    )
    assert done.returncode == 2, done.stderr[-3000:]
    errors = [line for line in done.stderr.splitlines() if line.startswith("medeval: error:")]
    assert any("could not write" in line and "/results_" in line and "cut short" in line for line in errors)
    assert "Traceback" not in done.stderr and "medeval report" not in done.stdout
    assert "acc" in done.stdout  # the scores are still printed
    left = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    assert left == [], left  # nothing cut short, no temporary file
