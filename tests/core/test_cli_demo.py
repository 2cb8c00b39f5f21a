"""`medeval demo`: a first run on a fresh offline machine (tiny model into the cache, synthetic samples,
fake judges on loopback, then the report)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def test_the_cached_model_is_reused_not_rebuilt(tmp_path, monkeypatch):
    from medeval_metrics import demo
    from medeval_metrics.testing import tiny_model

    folder = tmp_path / "demo-tiny-lm"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"x")
    monkeypatch.setattr(tiny_model, "build_tiny_model", lambda *a, **k: pytest.fail("rebuilt a cached model"))
    assert demo.tiny_model(tmp_path, say=lambda _: None) == folder


def test_a_half_built_model_is_built_again(tmp_path, monkeypatch):
    from medeval_metrics import demo
    from medeval_metrics.testing import tiny_model

    (tmp_path / "demo-tiny-lm").mkdir()
    (tmp_path / "demo-tiny-lm" / "config.json").write_text("{}")  # an interrupted build: no weights
    built = []

    def fake_build(path):
        path.mkdir(parents=True)
        (path / "config.json").write_text("{}")
        (path / "model.safetensors").write_bytes(b"w")
        built.append(path)
        return path

    monkeypatch.setattr(tiny_model, "build_tiny_model", fake_build)
    said = []
    folder = demo.tiny_model(tmp_path, say=said.append)
    assert built and (folder / "model.safetensors").read_bytes() == b"w" and "first run only" in said[0]


def test_the_shipped_samples_load_with_the_pack_loaders():
    from medeval_metrics import demo
    from medeval_metrics.emsqa.data import load_docs
    from medeval_metrics.medicationqa.data import read_local

    docs = load_docs(demo.sample_path("emsqa"), "demo")
    rows = read_local(demo.sample_path("medicationqa"))
    assert len(docs) == 12 and len(rows) == 8
    assert all("synthetic" in row["url"] for row in rows)


@pytest.mark.e2e
def test_demo_runs_every_benchmark_end_to_end_offline(tmp_path):
    out = tmp_path / "out"
    proc = run_cli(["demo", "--output", str(out)], cwd=tmp_path, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "cache" / "medeval" / "demo-tiny-lm" / "config.json").is_file()  # built into the user cache
    report = out / "report"
    results = (report / "results.md").read_text()
    for task in ("emsqa_private", "medicationqa", "emrqa_risk"):
        assert f"`{task}`" in results
    judges = json.loads((report / "judges.json").read_text())
    assert set(next(iter(judges.values()))["medicationqa"]) == {"demo-judge-a", "demo-judge-b"}
    figures = json.loads((report / "report.json").read_text())["figures"]
    assert any("medicationqa__judge_scores" in f for f in figures) and any("emrqa_risk" in f for f in figures)
    assert all((report / f).stat().st_size > 1000 for f in figures)
    assert f"The report is in {report}" in proc.stdout and "synthetic" in proc.stdout


@pytest.mark.e2e
def test_a_second_demo_into_the_same_folder_reports_one_run_and_its_figures(tmp_path, capsys):
    """The fake judges get a new loopback port each run: the second report is of one run (the newest),
    with no comparison, and the report folder holds only its own figures (the user's files stay)."""
    from conftest import run_medeval

    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    out = tmp_path / "out"
    first = run_cli(["demo", "--output", str(out)], cwd=tmp_path, env=env, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    report = out / "report"
    figures_first = sorted(json.loads((report / "report.json").read_text())["figures"])
    (report / "my-notes.md").write_text("mine")
    second = run_cli(["demo", "--output", str(out)], cwd=tmp_path, env=env, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "2 runs with the same settings; reporting the newest" in second.stderr
    manifest = json.loads((report / "report.json").read_text())
    assert len(manifest["runs"]) == 1 and "comparison.md" not in manifest["written"]
    assert manifest["runs"][0]["results_file"].endswith(sorted((out / "run").rglob("results_*.json"))[-1].name)
    on_disk = sorted(p.relative_to(report).as_posix() for p in report.rglob("*.png"))
    assert on_disk == sorted(manifest["figures"]) == figures_first  # same names: one run, labelled by its model
    assert "## Comparison" not in (report / "results.md").read_text()
    assert (report / "my-notes.md").read_text() == "mine"
    # the reviewer's card path: a card that does not exist yet is created
    proc = run_medeval(["report", str(out / "run"), "--output", str(tmp_path / "r"), "--no-figures",
                        "--update-card", str(tmp_path / "path" / "to" / "model" / "README.md")], capsys)
    assert proc.returncode == 0 and ": created" in proc.stdout, proc.stderr
