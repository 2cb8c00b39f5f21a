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
    proc = run_cli(
        ["demo", "--output", str(out)], cwd=tmp_path, env={"XDG_CACHE_HOME": str(tmp_path / "cache")}, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not (tmp_path / "cache" / "medeval" / "demo-tiny-lm").exists()  # no model to build any more
    report = out / "report"
    results = (report / "results.md").read_text()
    for task in ("emsqa_private", "medicationqa", "emrqa_risk"):
        assert f"`{task}`" in results
    judges = json.loads((report / "judges.json").read_text())
    assert set(next(iter(judges.values()))["medicationqa"]) == {"scripted-judge-a", "scripted-judge-b"}
    # EMSQA's two readings: items 0, 1, 3, 4, 6, 7, 9, 10 right; the even ones (0, 2, ..., 10) in the requested
    # JSON list, so strict-match reads 6 of 12 and scores 0, 4, 6, 10 right; item 11 names no option
    emsqa = json.loads(next((out / "run").rglob("results_*.json")).read_text())["results"]["emsqa_private"]
    assert emsqa["acc,flexible-extract"] == pytest.approx(8 / 12) and emsqa["acc,strict-match"] == pytest.approx(4 / 12)
    assert emsqa["requested_format,strict-match"] == emsqa["requested_format,flexible-extract"] == 0.5
    assert emsqa["unparseable,flexible-extract"] == pytest.approx(1 / 12) and emsqa["unparseable,strict-match"] == 0.5
    card = (report / "card_section.md").read_text()
    assert "Exact set-match accuracy, flexible-extract (headline)" in card and "0.3333 ± " in card
    # issue 33: the synthetic items are shown, each scripted verdict says so, and the run says what is synthetic
    page = (report / "report.html").read_text()
    assert "private data, hidden" not in page and "I would need to examine the patient first." in page
    assert page.count("scripted demo verdict (the answer is not read)") == 8 * 2 * 3  # items x judges x dimensions
    note = json.loads(next((out / "run").rglob("medeval_demo.json")).read_text())
    assert note["scripted_judges"] == ["scripted-judge-a", "scripted-judge-b"] and note["scripted_model"] is True
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
    proc = run_medeval(
        [
            "report",
            str(out / "run"),
            "--output",
            str(tmp_path / "r"),
            "--no-figures",
            "--update-card",
            str(tmp_path / "path" / "to" / "model" / "README.md"),
        ],
        capsys,
    )
    assert proc.returncode == 0 and ": created" in proc.stdout, proc.stderr


def _captured_demo(tmp_path, monkeypatch, **flags):
    """The lm-eval command line the demo builds (lm-eval itself is not run), with SmolLM2 stood in for."""
    from medeval_metrics import cli, demo

    seen = {}
    monkeypatch.setattr(demo, "real_model", lambda cache: tmp_path / "smollm2")

    def fake_run(argv):
        seen["argv"] = argv
        return 1  # stop before the report

    monkeypatch.setattr(cli, "run_lm_eval", fake_run)
    with pytest.raises(Exception, match="the demo run failed"):
        demo.run_demo(tmp_path / "out", cache=tmp_path / "cache", say=lambda _: None, **flags)
    argv = seen["argv"]
    return argv, json.loads(argv[argv.index("--metadata") + 1])


def test_the_default_demo_is_unchanged_scripted_model_no_chat_template(tmp_path, monkeypatch):
    argv, meta = _captured_demo(tmp_path, monkeypatch)
    assert argv[argv.index("--model") + 1] == "medeval-scripted" and "--apply_chat_template" not in argv
    assert not any(a.startswith("pretrained=") for a in argv) and "--allow-unscored" not in argv
    assert [j["name"] for j in meta["medeval_judges"]["judges"]] == ["scripted-judge-a", "scripted-judge-b"]


def test_real_model_demo_evaluates_smollm2_with_its_chat_template(tmp_path, monkeypatch):
    argv, meta = _captured_demo(tmp_path, monkeypatch, use_real_model=True)
    assert f"pretrained={tmp_path / 'smollm2'}" in argv and "--apply_chat_template" in argv
    assert "max_gen_toks=96" in argv
    assert [j["name"] for j in meta["medeval_judges"]["judges"]] == ["scripted-judge-a", "scripted-judge-b"]


def test_real_judge_puts_smollm2_on_the_panel_on_the_cpu(tmp_path, monkeypatch):
    argv, meta = _captured_demo(tmp_path, monkeypatch, use_real_model=True, real_judge=True)
    judges = meta["medeval_judges"]["judges"]
    assert [j["name"] for j in judges] == ["scripted-judge-a", "scripted-judge-b", "smollm2"]
    assert judges[2]["backend"] == "hf" and judges[2]["model"] == str(tmp_path / "smollm2")
    assert judges[2]["model_args"]["device"] == "cpu"
    assert "--allow-unscored" in argv  # its items are mostly unscored; the demo still reports


def test_real_model_demo_without_the_wheel_is_one_line_naming_the_step(tmp_path, monkeypatch, capsys):
    from medeval_metrics.cli import main

    monkeypatch.setenv("MEDEVAL_REAL_MODEL_SOURCE", str(tmp_path / "missing.whl"))
    assert main(["demo", "--real-model", "--output", str(tmp_path / "out"), "--cache", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("medeval: error: demo --real-model: make-real-model: source:")


@pytest.mark.e2e
def test_real_model_demo_runs_and_reports_real_answers(tmp_path, monkeypatch, real_model):
    from medeval_metrics import demo

    monkeypatch.setattr(demo, "real_model", lambda cache: real_model)
    report = demo.run_demo(tmp_path / "out", cache=tmp_path / "cache", say=lambda _: None, use_real_model=True)
    results = (tmp_path / "out" / "report" / "results.md").read_text()
    for task in ("emsqa_private", "medicationqa", "emrqa_risk"):
        assert f"`{task}`" in results
    samples = next((tmp_path / "out" / "run").glob("**/samples_medicationqa_*.jsonl")).read_text().splitlines()
    answers = [json.loads(line)["resps"][0][0] for line in samples]
    # a trained model writes English prose about the medicine, not the tiny model's byte soup
    assert sum(len(a.split()) >= 5 and a.isascii() for a in answers) >= len(answers) // 2
    assert report["elapsed_s"] > 0


def test_the_scripted_judges_say_on_each_verdict_that_they_do_not_read_the_answer(tmp_path):
    """Issue 33: the demo's judge scores are scripted (a fixed function of judge and question): each judge's name and
    each verdict's reasons say so, with the scores the fake server gives anyway."""
    from medeval_metrics import demo
    from medeval_metrics.medicationqa import load_medicationqa
    from medeval_metrics.testing.fake_judge import default_scores

    meta = demo.demo_metadata(tmp_path, "http://127.0.0.1:9/v1/chat/completions")
    assert [j["name"] for j in meta["medeval_judges"]["judges"]] == ["scripted-judge-a", "scripted-judge-b"]
    script = demo.judge_script(meta)
    questions = [doc["question"] for doc in load_medicationqa(**meta)["test"]]
    assert sorted(script) == sorted((judge, q) for q in questions for judge in demo.SCRIPTED_JUDGES)
    verdict = script[("scripted-judge-a", questions[0])][0]
    assert verdict["scores"] == default_scores("scripted-judge-a", questions[0])
    assert set(verdict["reasons"].values()) == {"scripted demo verdict (the answer is not read)"}


def test_the_demo_tells_the_report_its_data_is_synthetic_and_shows_the_items(tmp_path, monkeypatch):
    """Issue 33: the demo's items are written for the project: report.html shows them (the demo asks for that),
    and the run folder's medeval_demo.json says which tasks are synthetic and what is scripted."""
    from medeval_metrics import cli, demo, report

    seen = {}
    monkeypatch.setattr(demo, "real_model", lambda cache: tmp_path / "smollm2")

    def fake_run(argv):  # the results file lm-eval writes into its folder per model
        folder = tmp_path / "out" / "run" / "smollm2"
        folder.mkdir(parents=True)
        (folder / "results_2026-12-05T10-00-00.json").write_text("{}")
        return 0

    monkeypatch.setattr(cli, "run_lm_eval", fake_run)
    monkeypatch.setattr(report, "build_report", lambda *a, **k: seen.update(k) or {"notes": [], "figures": []})
    demo.run_demo(tmp_path / "out", cache=tmp_path / "cache", say=lambda _: None, use_real_model=True)
    assert seen["html"] is True and seen["html_show_private"] is True
    note = json.loads((tmp_path / "out" / "run" / "smollm2" / "medeval_demo.json").read_text())
    assert note["synthetic_data"] == ["emsqa_private", "medicationqa", "emrqa_risk"]
    assert note["scripted_judges"] == ["scripted-judge-a", "scripted-judge-b"] and note["scripted_model"] is False
    assert "scripted" in note["note"] and "no user or patient data" in note["note"]
