"""`medeval demo`: a first run on a fresh offline machine (a scripted model, synthetic samples, fake judges on
loopback, then the report)."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


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
    assert not (tmp_path / "cache" / "medeval" / "demo-tiny-lm").exists()  # no model to build any more
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
def test_a_second_demo_into_the_same_folder_reuses_its_preparation_and_replaces_its_run(tmp_path, capsys):
    """The second report is of one run (the demo's previous results are replaced), with no comparison, and the
    report folder holds only its own figures (the user's files stay)."""
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
    # the preparation is reused (one cache folder, prepared by the first demo only) and the run replaced
    assert "emrQA prepared in" in first.stderr and "emrQA prepared in" not in second.stderr
    assert len(list((out / "emrqa-cache").iterdir())) == 1
    assert "replacing the previous demo run" in second.stderr and "runs with the same settings" not in second.stderr
    assert len(list((out / "run").rglob("results_*.json"))) == 1
    manifest = json.loads((report / "report.json").read_text())
    assert len(manifest["runs"]) == 1 and "comparison.md" not in manifest["written"]
    assert manifest["runs"][0]["results_file"].endswith(next((out / "run").rglob("results_*.json")).name)
    on_disk = sorted(p.relative_to(report).as_posix() for p in report.rglob("*.png"))
    assert on_disk == sorted(manifest["figures"]) == figures_first  # same names: one run, labelled by its model
    assert "## Comparison" not in (report / "results.md").read_text()
    assert (report / "my-notes.md").read_text() == "mine"
    # the reviewer's card path: a card that does not exist yet is created
    proc = run_medeval(["report", str(out / "run"), "--output", str(tmp_path / "r"), "--no-figures",
                        "--update-card", str(tmp_path / "path" / "to" / "model" / "README.md")], capsys)
    assert proc.returncode == 0 and ": created" in proc.stdout, proc.stderr
