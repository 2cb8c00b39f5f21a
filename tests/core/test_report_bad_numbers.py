"""Issue 32: `medeval report` checks every number it publishes. A score outside its metric's range (the spec's
MetricInfo.scale), not finite or not a number, or a negative / non-finite stderr, is one line naming the file, the
task and the metric (exit 2), with nothing written; with --skip-bad-numbers it is left out of the card,
model_index.yaml, results.md and report.html and listed in the notes and on the console. Runs of different task
versions compared say so. No lm-eval run: results and samples files as lm-eval writes them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import run_medeval

DATE_1, DATE_2 = "2026-01-01T10-00-00.000001", "2026-01-02T10-00-00.000001"


def _results(folder: Path, task: str, key: str, value, stderr=0.01, date=DATE_1, version=1, model="org/m") -> Path:
    """A results file as lm-eval writes it, with one pack task whose metric ``key`` ("metric,filter") is ``value``
    beside a good EMSQA score (so a report is always possible without the bad one)."""
    metric, filter_name = key.split(",")
    entries = {
        "emsqa_public_mc": {"alias": "emsqa_public_mc", "acc,none": 0.5, "acc_stderr,none": 0.02},
        task: {"alias": task, key: value, f"{metric}_stderr,{filter_name}": stderr},
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"results_{date}.json"
    path.write_text(
        json.dumps(
            {
                "results": entries,
                "versions": {"emsqa_public_mc": 1, task: version},
                "n-shot": {t: 0 for t in entries},
                "n-samples": {t: {"original": 100, "effective": 100} for t in entries},
                "config": {"model": "hf", "model_args": f"pretrained={model}", "limit": None},
            }
        )
    )
    return path


def _report(tmp_path: Path, capsys, *extra: str):
    return run_medeval(
        ["report", str(tmp_path / "run"), "--output", str(tmp_path / "r"), "--no-figures", *extra], capsys
    )


BAD_VALUES = [
    # (task, metric key, value, why): each outside what the benchmark's spec says the metric can be
    ("emsqa_public_cot", "acc,flexible-extract", float("nan"), "nan is not a finite number"),
    ("emsqa_public_cot", "acc,flexible-extract", float("inf"), "inf is not a finite number"),
    ("emsqa_public_cot", "acc,flexible-extract", float("-inf"), "-inf is not a finite number"),
    ("emsqa_public_cot", "acc,flexible-extract", 1.7, "1.7 is outside the metric's range 0 to 1"),
    ("emsqa_public_cot", "acc,flexible-extract", -0.3, "-0.3 is outside the metric's range 0 to 1"),
    ("emsqa_public_cot", "acc,flexible-extract", "0.41", "'0.41' is text, not a number"),
    ("emsqa_public_cot", "acc,flexible-extract", True, "True is true/false (true), not a number"),
    ("emsqa_public_cot", "acc,flexible-extract", None, "None is null, not a number"),
    ("medicationqa", "judge_panel_score,scored", 0.5, "0.5 is outside the metric's range 1 to 5"),
    ("medicationqa", "judge_panel_score,scored", 5.5, "5.5 is outside the metric's range 1 to 5"),
    ("medicationqa", "bleu,scored", 100.5, "100.5 is outside the metric's range 0 to 100"),
    ("medicationqa", "judge_agreement,scored", -1.5, "-1.5 is outside the metric's range -1 to 1"),
    ("emrqa_risk", "relaxed_em,none", 1.01, "1.01 is outside the metric's range 0 to 1"),
]


@pytest.mark.parametrize("task, key, value, why", BAD_VALUES, ids=[f"{t}-{v}" for t, _, v, _ in BAD_VALUES])
def test_a_bad_score_is_one_line_naming_file_task_and_metric(tmp_path, capsys, task, key, value, why):
    path = _results(tmp_path / "run", task, key, value)
    proc = _report(tmp_path, capsys)
    assert proc.returncode == 2, proc.stdout
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    metric, filter_name = key.split(",")
    assert f"{path}: task {task}, metric {metric} (filter {filter_name}): {why}" in proc.stderr
    assert "--skip-bad-numbers" in proc.stderr
    assert not (tmp_path / "r").exists()  # refused before anything is written


@pytest.mark.parametrize("task, key, value, why", BAD_VALUES, ids=[f"{t}-{v}" for t, _, v, _ in BAD_VALUES])
def test_skip_bad_numbers_leaves_it_out_and_lists_it(tmp_path, capsys, task, key, value, why):
    path = _results(tmp_path / "run", task, key, value)
    card = tmp_path / "README.md"
    proc = _report(tmp_path, capsys, "--skip-bad-numbers", "--html", "--update-card", str(card))
    assert proc.returncode == 0, proc.stderr
    metric, filter_name = key.split(",")
    listed = f"{path}: task {task}, metric {metric} (filter {filter_name}): {why}"
    assert f"medeval report: note: left out: {listed}" in proc.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert f"left out: {listed}" in report["notes"]
    assert [(s["task"], s["metric"]) for s in report["runs"][0]["scores"]] == [("emsqa_public_mc", "acc")]
    results_md = (tmp_path / "r" / "results.md").read_text()
    assert f"- {listed}" in results_md.split("## Numbers left out")[1]
    assert f"`{task}`" not in results_md.split("## Numbers left out")[0]  # in no table
    index = yaml.safe_load((tmp_path / "r" / "model_index.yaml").read_text())["model-index"][0]
    assert [r["task"]["name"] for r in index["results"]] == ["emsqa_public_mc"]
    card_text = card.read_text()
    assert task not in card_text and ".nan" not in card_text and ".inf" not in card_text
    page = (tmp_path / "r" / "report.html").read_text()
    assert "Numbers left out" in page and f"metric {metric} (filter {filter_name})" in page


@pytest.mark.parametrize(
    "stderr, why",
    [
        (-0.25, "-0.25 is a negative standard error"),
        (float("nan"), "nan is not a finite number"),
        (float("inf"), "inf is not a finite number"),
        ("0.01", "'0.01' is text, not a number"),
        (False, "False is true/false (false), not a number"),
    ],
)
def test_a_bad_stderr_is_refused_or_left_out(tmp_path, capsys, stderr, why):
    path = _results(tmp_path / "run", "emsqa_public_cot", "acc,flexible-extract", 0.41, stderr=stderr)
    proc = _report(tmp_path, capsys)
    assert proc.returncode == 2
    expected = f"{path}: task emsqa_public_cot, metric acc_stderr (filter flexible-extract): {why}"
    assert expected in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    proc = _report(tmp_path, capsys, "--skip-bad-numbers")
    assert proc.returncode == 0 and f"left out: {expected}" in proc.stderr
    # the score stays, without the stderr: N/A; a proportion's Wilson interval needs none (41 of 100)
    assert (
        "| Exact set-match accuracy (`acc`) | 0.4100 | N/A | 0.319–0.508 (Wilson) | 100 |"
        in (tmp_path / "r" / "results.md").read_text()
    )


@pytest.mark.parametrize(
    "task, key, value",
    [
        ("emsqa_public_cot", "acc,flexible-extract", 0.0),
        ("emsqa_public_cot", "acc,flexible-extract", 1),  # an int, at the top of the range
        ("medicationqa", "judge_panel_score,scored", 1.0),
        ("medicationqa", "judge_panel_score,scored", 5.0),
        ("medicationqa", "bleu,scored", 57.3),
        ("medicationqa", "judge_agreement,scored", -0.2),
        ("medicationqa", "bertscore_f1,scored", -0.05),  # not listed in the spec: no range known
        ("emsqa_public_cot", "acc,flexible-extract", 1 + 1e-12),  # a mean's rounding at the bound
    ],
)
def test_a_score_in_its_range_is_published(tmp_path, capsys, task, key, value):
    _results(tmp_path / "run", task, key, value)
    proc = _report(tmp_path, capsys)
    assert proc.returncode == 0, proc.stderr
    scores = json.loads((tmp_path / "r" / "report.json").read_text())["runs"][0]["scores"]
    assert (task, key.split(",")[0], value) in [(s["task"], s["metric"], s["value"]) for s in scores]


def test_lm_eval_s_no_value_is_not_an_error(tmp_path, capsys):
    """lm-eval writes "N/A" for a statistic without a value (and as a stderr it has none): no row, no error."""
    _results(tmp_path / "run", "medicationqa", "judge_agreement,scored", "N/A", stderr="N/A")
    proc = _report(tmp_path, capsys)
    assert proc.returncode == 0, proc.stderr
    assert "judge_agreement" not in (tmp_path / "r" / "results.md").read_text()


# --------------------------------------------------------------------------- per-item values in the samples


def _emsqa_samples(folder: Path, values: list, date=DATE_1) -> Path:
    path = folder / f"samples_emsqa_public_mc_{date}.jsonl"
    with path.open("w") as out:
        for i, value in enumerate(values):
            doc = {"question": f"q{i}", "level": ["emt"], "category": ["trauma"]}
            out.write(json.dumps({"doc_id": i, "doc": doc, "filter": "none", "acc": value, "f1": 0.5}) + "\n")
    return path


@pytest.mark.parametrize(
    "value, why", [(float("nan"), "nan is not a finite number"), (2.0, "2 is outside the metric's range 0 to 1")]
)
def test_a_bad_item_value_in_the_samples_is_refused_or_left_out_of_the_breakdown(tmp_path, capsys, value, why):
    _results(tmp_path / "run", "emsqa_public_cot", "acc,flexible-extract", 0.41)
    samples = _emsqa_samples(tmp_path / "run", [1.0, value, 0.0])
    proc = _report(tmp_path, capsys)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"{samples}: task emsqa_public_mc, metric acc (item 1): {why}" in proc.stderr
    proc = _report(tmp_path, capsys, "--skip-bad-numbers")
    assert proc.returncode == 0, proc.stderr
    assert f"left out: {samples}: task emsqa_public_mc, metric acc (item 1): {why}" in proc.stderr
    text = (tmp_path / "r" / "breakdowns.json").read_text()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in breakdowns.json"))
    trauma = json.loads(text)["org/m"]["emsqa_public_mc"]["none"]["subject_area"]["trauma"]
    assert trauma["acc"]["n"] == 2 and trauma["acc"]["value"] == 0.5  # items 0 and 2: (1 + 0) / 2
    assert trauma["f1"]["n"] == 3  # the item's other values stay


# --------------------------------------------------------------------------- different task versions compared


def test_a_comparison_of_different_task_versions_says_so(tmp_path, capsys):
    _results(tmp_path / "a", "emsqa_public_cot", "acc,flexible-extract", 0.41, version=1, model="org/m1")
    _results(tmp_path / "b", "emsqa_public_cot", "acc,flexible-extract", 0.45, version=2, model="org/m2", date=DATE_2)
    proc = run_medeval(
        ["report", str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(tmp_path / "r"), "--no-figures"],
        capsys,
    )
    assert proc.returncode == 0, proc.stderr
    note = (
        "`emsqa_public_cot` was run at different task versions (version 1 in org/m1; version 2 in org/m2): "
        "its scores may not be comparable"
    )
    assert note in (tmp_path / "r" / "comparison.md").read_text()
    assert note in (tmp_path / "r" / "results.md").read_text().split("## Comparison")[1]
    assert f"medeval report: note: {note}" in proc.stderr
    # emsqa_public_mc has version 1 in both: no note for it
    assert "`emsqa_public_mc` was run at different" not in (tmp_path / "r" / "comparison.md").read_text()


def test_a_comparison_of_one_task_version_has_no_note(tmp_path, capsys):
    _results(tmp_path / "a", "emsqa_public_cot", "acc,flexible-extract", 0.41, model="org/m1")
    _results(tmp_path / "b", "emsqa_public_cot", "acc,flexible-extract", 0.45, model="org/m2", date=DATE_2)
    proc = run_medeval(
        ["report", str(tmp_path / "a"), str(tmp_path / "b"), "--output", str(tmp_path / "r"), "--no-figures"],
        capsys,
    )
    assert proc.returncode == 0 and "different task versions" not in (tmp_path / "r" / "comparison.md").read_text()


# --------------------------------------------------------------------------- judges' scores and `medeval judge`'s records


def _judged_samples(folder: Path, scores: list) -> Path:
    path = folder / f"samples_medicationqa_{DATE_1}.jsonl"
    with path.open("w") as out:
        for i, score in enumerate(scores):
            verdicts = {"judge-a": {"scores": {"accuracy": score}, "unscored_reason": None}}
            record = {"doc_id": i, "doc": {"question_type": "Dose"}, "filter": "scored", "judge_verdicts": verdicts}
            out.write(json.dumps({**record, "judge_panel_score": 4.0, "rougeL": 0.5}) + "\n")
    return path


def test_a_judge_score_that_is_not_finite_is_refused_or_left_out(tmp_path, capsys):
    _results(tmp_path / "run", "medicationqa", "judge_panel_score,scored", 4.0)
    samples = _judged_samples(tmp_path / "run", [4, float("nan"), 5])
    proc = _report(tmp_path, capsys)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert f"{samples}: task medicationqa, metric judge judge-a's accuracy (item 1): nan is not finite" in proc.stderr
    assert _report(tmp_path, capsys, "--skip-bad-numbers").returncode == 0
    text = (tmp_path / "r" / "judges.json").read_text()
    accuracy = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in judges.json"))
    # the NaN counts as no usable score: the mean of 4 and 5
    assert accuracy["org/m"]["medicationqa"]["judge-a"]["accuracy"] == {
        "value": 4.5,
        "stderr": 0.5,
        "n": 2,
        "missing": 1,
    }


def test_a_bad_value_in_medeval_judge_s_records_names_that_file(tmp_path, capsys):
    run = tmp_path / "run"
    path = _results(run, "medicationqa", "judge_panel_score,scored", 4.0)
    results = json.loads(path.read_text())
    results["medeval_judge"] = {"medicationqa": {"judged_at": DATE_2}}
    path.write_text(json.dumps(results))
    _judged_samples(run, [4, 4])
    judged = run / f"judged_medicationqa_{DATE_2}.jsonl"
    judged.write_text(
        "".join(
            json.dumps({"doc_id": i, "verdicts": None, "metrics": {"judge_panel_score": v}}) + "\n"
            for i, v in enumerate([4.0, 9.0])
        )
    )
    proc = _report(tmp_path, capsys)
    assert (
        f"{judged}: task medicationqa, metric judge_panel_score (item 1): 9 is outside the metric's range 1 to 5"
        in (proc.stderr)
    )
    assert _report(tmp_path, capsys, "--skip-bad-numbers").returncode == 0
    dose = json.loads((tmp_path / "r" / "breakdowns.json").read_text())["org/m"]["medicationqa"]["scored"]
    assert dose["question_type"]["Dose"]["judge_panel_score"] == {"value": 4.0, "stderr": None, "n": 1}
