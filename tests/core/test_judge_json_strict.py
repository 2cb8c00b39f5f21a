"""No NaN or Infinity in any JSON the pack writes (issue 21): a judged run, then `medeval judge`, with a
judge that fails on some items (so some statistics have no value), every file read by a strict parser."""

from __future__ import annotations

import json
import math

import pytest
from conftest import run_cli

from medeval_metrics.testing.fake_judge import FakeJudgeServer


def _strict(text: str, where: str):
    def refuse(constant: str):
        raise AssertionError(f"{where}: {constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_the_strict_reader_refuses_nan():
    with pytest.raises(AssertionError, match="NaN is not JSON"):
        _strict('{"a": NaN}', "x")


def test_finite_or_na_replaces_what_json_cannot_say():
    from medeval_metrics.judge.cli import finite_or_na

    value = {"a": math.nan, "b": [1.0, math.inf, -math.inf], "c": {"d": 2, "e": "x"}, "f": None}
    assert finite_or_na(value) == {"a": "N/A", "b": [1.0, "N/A", "N/A"], "c": {"d": 2, "e": "x"}, "f": None}
    assert json.dumps(finite_or_na(value), allow_nan=False)


@pytest.mark.e2e  # `medeval run` and `medeval judge` subprocesses
def test_every_json_file_of_a_judged_run_is_strict_json(tmp_path, monkeypatch):
    monkeypatch.delenv("MEDEVAL_JUDGES", raising=False)
    rows = [
        {
            "question": f"can i take drug{i} with food",
            "answer": f"Drug{i} can be taken with food.",
            "question_type": ["Dose", "Usage"][i % 2],
        }
        for i in range(4)
    ]
    data = tmp_path / "medicationqa.json"
    data.write_text(json.dumps(rows))
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": "Take it with food."}))
    out = tmp_path / "out"
    # judge b never gives a usable verdict: its success is 0 and every statistic over its scores has no value
    script = {("judge-b", row["question"]): [{"content": "I cannot grade this."}] * 4 for row in rows}
    with FakeJudgeServer(script=script) as server:
        judges = json.dumps(
            {
                "judges": [
                    {"name": "a", "backend": "local-chat-completions", "model": "judge-a", "base_url": server.url},
                    {"name": "b", "backend": "local-chat-completions", "model": "judge-b", "base_url": server.url},
                ],
                "cache": str(tmp_path / "cache.sqlite"),
                "max_reasks": 1,
            }
        )
        env = {"MEDEVAL_JUDGES": judges, "MEDEVAL_MEDICATIONQA_PATH": str(data)}
        run = run_cli(
            [
                "run",
                "--tasks",
                "medicationqa",
                "--model",
                "medeval-scripted",
                "--model_args",
                f"table={table}",
                "--limit",
                "1",
                "--output_path",
                str(out),
                "--log_samples",
                "--allow-unscored",
            ],
            cwd=tmp_path,
            env=env,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        judged = run_cli(["judge", str(out), "--quiet", "--allow-unscored"], cwd=tmp_path, env=env)
        assert judged.returncode == 0, judged.stderr[-3000:]
    files = [p for p in out.rglob("*") if p.is_file() and p.suffix in (".json", ".jsonl")]
    names = {p.name.split("_")[0] for p in files}
    assert {"results", "samples", "judged"} <= names, files
    assert any(p.name.endswith("_judged.json") for p in files)
    for path in files:
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines() if path.suffix == ".jsonl" else [text]
        for number, line in enumerate(lines, start=1):
            if line.strip():
                _strict(line, f"{path.name} line {number}")
    # the judged results keep lm-eval's convention: a statistic without a value is "N/A"
    judged_results = json.loads(next(out.rglob("results_*_judged.json")).read_text())
    task = judged_results["results"]["medicationqa"]
    assert "N/A" in task.values()
    own = json.loads(next(p for p in out.rglob("results_*.json") if not p.stem.endswith("_judged")).read_text())
    assert set(task) == set(own["results"]["medicationqa"])  # the same key set as lm-eval's own file


def test_the_tasks_agreement_is_na_where_alpha_is_undefined():
    from medeval_metrics.judge.aggregate import agreement_or_na, agreement_stderr

    one_judge = [[[4, None], [3, None]], [[5, None], [2, None]]]  # nothing pairable
    # lm-eval writes "N/A" as this aggregation's stderr; the report's bootstrap one is NaN, shown as N/A
    assert agreement_or_na(one_judge) == "N/A" and math.isnan(agreement_stderr(one_judge))
    agreeing = [[[4, 4], [3, 3]], [[5, 5], [2, 2]]]
    assert agreement_or_na(agreeing) == 1.0
