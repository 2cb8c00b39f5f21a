"""`medeval report` on the paths users take: an unwritable --output, a card that does not exist yet,
the same evaluation reported twice (the demo re-run into one folder), a folder re-used for another
report, and a --limit larger than the test set. No lm-eval run: results and samples files as lm-eval
writes them."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
import yaml
from conftest import run_medeval

from medeval_metrics.data import MedevalDataError

DATE_1, DATE_2 = "2026-01-01T10-00-00.000001", "2026-01-02T10-00-00.000001"


def _results(
    folder: Path,
    date: str,
    model: str = "org/m",
    values: dict | None = None,
    limit=None,
    counts: dict | None = None,
    task_hashes: dict | None = None,
) -> Path:
    """A results file as lm-eval writes it (EMSQA variants: ``values`` task -> acc; ``counts`` task ->
    (original, effective), default the whole public test set)."""
    values = values or {"emsqa_public_cot": 0.41}
    counts = counts or {t: (3721, 3721) for t in values}
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{date}.json"
    path.write_text(
        json.dumps(
            {
                "results": {
                    t: {"alias": t, "acc,flexible-extract": v, "acc_stderr,flexible-extract": 0.01}
                    for t, v in values.items()
                },
                "versions": {t: 1 for t in values},
                "n-shot": {t: 0 for t in values},
                "n-samples": {t: {"original": o, "effective": e} for t, (o, e) in counts.items()},
                "config": {"model": "hf", "model_args": f"pretrained={model}", "limit": limit},
                **({"task_hashes": task_hashes} if task_hashes is not None else {}),
            }
        )
    )
    return path


# --------------------------------------------------------------------------- --output that cannot be written


def _unwritable_outputs(tmp_path: Path) -> list[Path]:
    (tmp_path / "a-file").write_text("x")
    outputs = [tmp_path / "a-file" / "report", tmp_path / "a-file"]
    if Path("/proc/self").is_dir():
        outputs.append(Path("/proc/medeval-no-such/report"))  # the reviewer's case
    return outputs


def test_an_unwritable_output_is_one_line_naming_it(tmp_path, capsys):
    _results(tmp_path / "run", DATE_1)
    for output in _unwritable_outputs(tmp_path):
        proc = run_medeval(["report", str(tmp_path / "run"), "--output", str(output), "--no-figures"], capsys)
        assert proc.returncode == 2, output
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
        assert f"--output {output}: cannot write the report there" in proc.stderr
        assert "Pass --output a folder you can create and write to" in proc.stderr
    assert (tmp_path / "a-file").read_text() == "x"


def test_a_write_that_fails_midway_names_the_file(tmp_path, monkeypatch):
    from medeval_metrics.report import build_report

    _results(tmp_path / "run", DATE_1)
    from medeval_metrics import safe_files

    real_temporary = safe_files._exclusive_temporary

    def disk_full_at_results_md(path, *args, **kwargs):  # every report file is written through safe_files
        if path.name == "results.md":
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_temporary(path, *args, **kwargs)

    monkeypatch.setattr(safe_files, "_exclusive_temporary", disk_full_at_results_md)
    with pytest.raises(MedevalDataError) as caught:
        build_report([tmp_path / "run"], tmp_path / "r", figures=False)
    message = str(caught.value)
    assert message.startswith(
        f"{tmp_path / 'r' / 'results.md'}: could not write the report file (No space left on device)"
    )
    assert "is incomplete" in message


# --------------------------------------------------------------------------- --update-card on a card not there yet


def test_update_card_creates_a_card_that_does_not_exist_yet(tmp_path, capsys, monkeypatch):
    """The README's quick start: `--update-card path/to/model/README.md` with no such card (nor folder)."""
    _results(tmp_path / "run", DATE_1, model="org/m", values={"emsqa_public_cot": 0.41, "emsqa_public_mc": 0.47})
    monkeypatch.chdir(tmp_path)
    args = ["report", "run", "--output", "report", "--no-figures", "--update-card", "path/to/model/README.md"]
    proc = run_medeval(args, capsys)
    assert proc.returncode == 0, proc.stderr
    assert "model card path/to/model/README.md: created" in proc.stdout
    card = tmp_path / "path" / "to" / "model" / "README.md"
    text = card.read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    entry = header["model-index"][0]
    assert entry["name"] == "org/m"
    assert [(r["task"]["name"], r["metrics"][0]["value"]) for r in entry["results"]] == [
        ("emsqa_public_cot", 0.41),
        ("emsqa_public_mc", 0.47),
    ]
    assert "<!-- medeval:results:start -->" in text and "<!-- medeval:results:end -->" in text
    assert json.loads((tmp_path / "report" / "report.json").read_text())["card_created"] is True
    again = run_medeval(args, capsys)
    assert again.returncode == 0 and "model card path/to/model/README.md: already up to date" in again.stdout
    assert card.read_text() == text
    assert not list(card.parent.glob(".*partial"))


def test_update_card_given_a_folder_is_one_line(tmp_path, capsys):
    _results(tmp_path / "run", DATE_1)
    (tmp_path / "model").mkdir()
    proc = run_medeval(
        [
            "report",
            str(tmp_path / "run"),
            "--output",
            str(tmp_path / "r"),
            "--no-figures",
            "--update-card",
            str(tmp_path / "model"),
        ],
        capsys,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"--update-card {tmp_path / 'model'}: is a folder: pass the card file in it (README.md)" in proc.stderr
    assert (tmp_path / "r" / "results.md").is_file()  # the report itself is written


def test_a_card_write_that_fails_leaves_the_card_as_it_was(tmp_path, monkeypatch):
    from medeval_metrics.report import build_report

    _results(tmp_path / "run", DATE_1)
    card = tmp_path / "README.md"
    card.write_text("---\nlicense: mit\n---\n\n# The owner's card\n")
    from medeval_metrics import safe_files

    real_fdopen = safe_files.os.fdopen

    class HalfWritten:  # the card (the only binary write here) is half written, then the disk is full
        def __init__(self, handle):
            self.handle = handle

        def write(self, data):
            self.handle.write(data[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self.handle.__exit__(*exc)

    monkeypatch.setattr(
        safe_files.os,
        "fdopen",
        lambda fd, mode, **kw: HalfWritten(real_fdopen(fd, mode, **kw)) if "b" in mode else real_fdopen(fd, mode, **kw),
    )
    with pytest.raises(
        MedevalDataError, match=r"cannot write the card \(No space left on device\); it was not changed"
    ):
        build_report([tmp_path / "run"], tmp_path / "r", figures=False, update_card=card)
    assert card.read_text() == "---\nlicense: mit\n---\n\n# The owner's card\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "r", "run"]  # no partial file left


# --------------------------------------------------------------------------- what makes two runs the same run


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://127.0.0.1:46147/v1/chat/completions", "http://127.0.0.1/v1/chat/completions"),
        ('{"base_url": "http://localhost:8000/v1"}', '{"base_url": "http://localhost/v1"}'),
        ("https://user:pw@127.0.0.5:443/x", "https://user:pw@127.0.0.5/x"),
        ("http://[::1]:9000/v1", "http://[::1]/v1"),
        ("HTTP://LOCALHOST:1234", "HTTP://LOCALHOST"),
        # not loopback: the port is part of which server was asked
        ("https://judge.example.org:8443/v1", "https://judge.example.org:8443/v1"),
        ("http://10.0.0.7:8000/v1", "http://10.0.0.7:8000/v1"),
        ("http://localhost.example.org:8000/v1", "http://localhost.example.org:8000/v1"),
        ("http://127.0.0.1.evil.org:8000/v1", "http://127.0.0.1.evil.org:8000/v1"),
        ("127.0.0.1:8000 (no scheme: not a URL)", "127.0.0.1:8000 (no scheme: not a URL)"),
    ],
)
def test_without_loopback_ports(text, expected):
    from medeval_metrics.report.runs import without_loopback_ports

    assert without_loopback_ports(text) == expected


def _medicationqa_run(
    folder: Path, date: str, judge_url: str, answer: str = "Take it in the morning.", judge_model: str = "demo-judge-a"
) -> None:
    """A medicationqa run as lm-eval logs it: the task copies its judge panel into every doc, so
    lm-eval's doc hash (and task hash) change with the judges' URL."""
    import hashlib

    panel = json.dumps(
        {
            "judges": [{"name": "a", "backend": "local-chat-completions", "model": judge_model, "base_url": judge_url}],
            "concurrency": 8,
        }
    )
    doc = {
        "question": "When should I take levothyroxine?",
        "answer": answer,
        "question_type": "Usage",
        "judge_panel": panel,
    }
    doc_hash = hashlib.sha256(json.dumps(doc, indent=2).encode()).hexdigest()
    sample = {
        "doc_id": 0,
        "doc": doc,
        "filter": "none",
        "rougeL": 0.2,
        "doc_hash": doc_hash,
        "prompt_hash": "p" * 64,
        "target_hash": hashlib.sha256(answer.encode()).hexdigest(),
    }
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"samples_medicationqa_{date}.jsonl").write_text(json.dumps(sample) + "\n")
    (folder / f"results_{date}.json").write_text(
        json.dumps(
            {
                "results": {"medicationqa": {"alias": "medicationqa", "rougeL,none": 0.2, "rougeL_stderr,none": 0.01}},
                "versions": {"medicationqa": 3},
                "n-shot": {"medicationqa": 0},
                "n-samples": {"medicationqa": {"original": 1, "effective": 1}},
                "config": {"model": "hf", "model_args": "pretrained=org/m", "limit": None},
                "task_hashes": {"medicationqa": hashlib.sha256((doc_hash + "p" * 64).encode()).hexdigest()},
            }
        )
    )


def test_reruns_that_differ_by_a_loopback_judge_port_alone_are_one_run(tmp_path):
    from medeval_metrics.report.runs import load_runs

    _medicationqa_run(tmp_path / "run", DATE_1, "http://127.0.0.1:46147/v1/chat/completions")
    _medicationqa_run(tmp_path / "run", DATE_2, "http://127.0.0.1:43797/v1/chat/completions")
    notes: list[str] = []
    runs = load_runs([tmp_path / "run"], notes)
    assert [r.results_path.name for r in runs] == [f"results_{DATE_2}.json"]
    assert len(notes) == 1 and "2 runs with the same settings; reporting the newest" in notes[0]


@pytest.mark.parametrize(
    ("second", "why"),
    [
        ({"judge_url": "https://judge.example.org:8002/v1"}, "another server"),
        ({"judge_url": "http://127.0.0.1:43797/v1/chat/completions", "judge_model": "demo-judge-b"}, "another judge"),
        ({"judge_url": "http://127.0.0.1:43797/v1/chat/completions", "answer": "Take it at night."}, "other data"),
    ],
)
def test_runs_that_evaluated_something_else_stay_apart(tmp_path, second, why):
    from medeval_metrics.report.runs import load_runs

    first_url = (
        "https://judge.example.org:8001/v1"
        if "example" in second["judge_url"]
        else "http://127.0.0.1:46147/v1/chat/completions"
    )
    _medicationqa_run(tmp_path / "run", DATE_1, first_url)
    _medicationqa_run(tmp_path / "run", DATE_2, second.pop("judge_url"), **second)
    notes: list[str] = []
    assert len(load_runs([tmp_path / "run"], notes)) == 2, why
    assert notes == []


def test_differing_task_hashes_without_samples_stay_two_runs(tmp_path):
    from medeval_metrics.report.runs import load_runs

    _results(tmp_path / "run", DATE_1, task_hashes={"emsqa_public_cot": "a" * 64})
    _results(tmp_path / "run", DATE_2, task_hashes={"emsqa_public_cot": "b" * 64})
    assert len(load_runs([tmp_path / "run"])) == 2


# --------------------------------------------------------------------------- a report folder used again


def test_a_second_report_removes_only_what_the_first_wrote(tmp_path):
    from medeval_metrics.report import build_report

    _results(tmp_path / "a", DATE_1, model="org/a")
    _results(tmp_path / "b", DATE_2, model="org/b", values={"emsqa_public_cot": 0.5})
    out = tmp_path / "report"
    first = build_report([tmp_path / "a", tmp_path / "b"], out, figures=True)
    assert {"comparison.md", "comparison__emsqa.png", "model_index_org_a.yaml"} <= set(first["written"])
    (out / "my-notes.md").write_text("mine")  # the user's own files in the report folder
    (out / "figures").mkdir(exist_ok=True)
    (out / "figures" / "mine.png").write_bytes(b"png")
    (tmp_path / "outside.md").write_text("outside")
    manifest = json.loads((out / "report.json").read_text())
    manifest["written"] += ["../outside.md", str(tmp_path / "outside.md")]  # a tampered manifest
    (out / "report.json").write_text(json.dumps(manifest))
    edited = out / "model_index_org_b.yaml"  # a report file the user changed since: kept
    edited.write_text("edited")
    later = (out / "report.json").stat().st_mtime + 10
    os.utime(edited, (later, later))

    second = build_report([tmp_path / "a"], out, figures=True)
    on_disk = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert on_disk == set(second["written"]) | {
        "report.json",
        "my-notes.md",
        "figures/mine.png",
        "model_index_org_b.yaml",
    }
    assert not (out / "comparison.md").exists() and not (out / "comparison__emsqa.png").exists()
    assert not (out / "model_index_org_a.yaml").exists() and (out / "model_index.yaml").is_file()
    assert (tmp_path / "outside.md").read_text() == "outside" and edited.read_text() == "edited"
    assert any("removed 3 files the previous report there wrote" in n for n in second["notes"]), second["notes"]


def test_a_second_report_removes_figure_folders_it_emptied(tmp_path):
    from medeval_metrics.report import build_report

    out = tmp_path / "report"
    out.mkdir()
    stale = out / "figures" / "old-run_2026-01-01T10-00-00"
    stale.mkdir(parents=True)
    (stale / "emsqa_public_cot__level.png").write_bytes(b"png")
    (out / "figures" / "keep").mkdir()
    (out / "figures" / "keep" / "mine.txt").write_text("mine")
    (out / "report.json").write_text(
        json.dumps(
            {"written": ["figures/old-run_2026-01-01T10-00-00/emsqa_public_cot__level.png", "figures/keep/mine.txt"]}
        )
    )
    _results(tmp_path / "run", DATE_1)
    build_report([tmp_path / "run"], out, figures=False)
    assert not stale.exists() and (out / "figures").is_dir()
    assert (out / "figures" / "keep" / "mine.txt").read_text() == "mine"  # not a file a report writes


# --------------------------------------------------------------------------- --limit larger than the set


@pytest.mark.parametrize(
    ("limit", "counts", "partial"),
    [
        (5000, {"emsqa_public_cot": (3721, 3721)}, False),  # --limit 5000 on the whole set
        (5000.0, {"emsqa_public_cot": (40, 40), "emsqa_public_mc": (40, 40)}, False),
        (1.0, {"emsqa_public_cot": (40, 40)}, False),  # --limit 1.0: every item
        (5, {"emsqa_public_cot": (3721, 5)}, True),
        (0.5, {"emsqa_public_cot": (40, 20)}, True),
        (5000, {"emsqa_public_cot": (40, 40), "emsqa_public_mc": (3721, 3721)}, False),
        (40, {"emsqa_public_cot": (40, 40), "emsqa_public_mc": (3721, 40)}, True),  # one set cut: partial
        (None, {"emsqa_public_cot": (3721, 3721)}, False),
    ],
)
def test_a_limit_that_cut_no_set_is_a_full_run(tmp_path, limit, counts, partial):
    from medeval_metrics.report import build_report

    values = {task: 0.4 for task in counts}
    _results(tmp_path / "run", DATE_1, values=values, limit=limit, counts=counts)
    report = build_report([tmp_path / "run"], tmp_path / "r", figures=False)
    results = (tmp_path / "r" / "results.md").read_text()
    assert ("model_index.yaml" in report["written"]) is not partial
    assert ("partial run: not comparable" in results) is partial
    if limit is not None and not partial:
        assert f"| limit | {int(limit)} (not below any set's size: full test sets) |" in results
        index = yaml.safe_load((tmp_path / "r" / "model_index.yaml").read_text())["model-index"][0]["results"]
        assert sorted(r["task"]["name"] for r in index) == sorted(counts)


def test_a_limited_run_without_sample_counts_stays_partial(tmp_path):
    from medeval_metrics.report.runs import Run

    run = Run(tmp_path / f"results_{DATE_1}.json", {"results": {"emsqa_public_cot": {}}, "config": {"limit": 5000}})
    assert run.partial
    run.results["n-samples"] = {"emsqa_public_cot": {"original": 40}}
    assert run.partial
    run.results["n-samples"] = {"emsqa_public_cot": {"original": 40, "effective": 40}}
    assert not run.partial
    run.results["results"]["emsqa"] = {}  # a group: lm-eval gives it results but no sample counts
    assert not run.partial
    run.results["n-samples"]["emsqa_public_mc"] = {"original": 3721, "effective": 5000 // 2}
    assert run.partial
