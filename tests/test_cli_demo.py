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

    docs = load_docs(demo.sample_path("emsqa_sample.json"), "demo")
    rows = read_local(demo.sample_path("medicationqa_sample.json"))
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
