"""Quiet runs (issue 13, item 8): a normal run of the pack's tasks prints none of the warnings the pack's
own configuration used to cause, under `medeval run` and under plain `lm_eval --include_path`, without quieting
any of lm-eval's own lines (issue 30: no log filter on lm-eval's loggers; its per-task custom_dataset notice and
its --limit warning are lm-eval's to print).

The pack's causes, each fixed at its source: "No aggregation function defined" for metrics named at run time
(none is: the YAMLs name every metric) and "Cannot determine EOS string" from each chat-API judge (4,
``api_request_payload``)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import FIXTURES, SHARED_DATA, find_results, run_cli, run_lm_eval_cli

from medeval_metrics.emrqa.synthetic import write_synthetic
from medeval_metrics.testing.fake_judge import FakeJudgeServer

PACK_NOISE = (
    "No aggregation function defined",
    "Cannot determine EOS string",
)
ROWS = [
    {
        "question": f"can i take drug{i} with food",
        "focus_drug": f"drug{i}",
        "question_type": "Usage",
        "answer": f"Drug{i} can be taken with or without food.",
        "section_title": "How to use",
        "url": f"https://example.org/{i}",
    }
    for i in range(4)
]


def _metadata(tmp_path, server: FakeJudgeServer) -> dict:
    (tmp_path / "medicationqa.json").write_text(json.dumps(ROWS))
    templates = SHARED_DATA / "emrqa" / "templates-all.csv"
    emrqa = write_synthetic(tmp_path / "emrqa", templates_csv=templates if templates.exists() else None)
    judges = {
        "judges": [
            {"name": name, "backend": "local-chat-completions", "model": f"judge-{name}", "base_url": server.url}
            for name in ("a", "b")
        ],
        "cache": str(tmp_path / "verdicts.sqlite"),
        "concurrency": 4,
    }
    return {
        "emsqa_private_path": str(FIXTURES / "emsqa_synthetic.json"),
        "medicationqa_path": str(tmp_path / "medicationqa.json"),
        "medeval_judges": json.dumps(judges),
        "emrqa_data_json": str(emrqa.data_json),
        "emrqa_data_ql_csv": str(emrqa.data_ql_csv),
        "emrqa_cache_dir": str(tmp_path / "emrqa-cache"),
    }


def _assert_quiet(proc, judge_requests: int, medeval_run: bool = True) -> None:
    text = proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert judge_requests > 0  # the panel really judged (the EOS warning came from its first request)
    # lm-eval's own warnings are lm-eval's (medeval run quiets none); medeval run also says --limit in its summary
    assert "--limit SHOULD ONLY BE USED FOR TESTING" in text
    assert ("--limit 4: a test run, not comparable scores" in text) == medeval_run
    assert [line for line in text.splitlines() if any(noise in line for noise in PACK_NOISE)] == []
    assert not re.search(r"WARNING .*\[medeval", text)  # no warning of the pack's own loggers


@pytest.mark.e2e
def test_medeval_run_of_each_benchmark_prints_no_pack_warnings(tmp_path):
    table = tmp_path / "table.json"
    table.write_text(json.dumps({"key": "question", "generate": {}, "default": 'The answer is ["a"].'}))
    with FakeJudgeServer() as server:
        proc = run_cli(
            [
                "run",
                "--tasks",
                "emsqa_private",
                "medicationqa",
                "emrqa_smoking",
                "emrqa_emrql_1",
                "--model",
                "medeval-scripted",
                "--model_args",
                f"table={table}",
                "--limit",
                "4",
                "--metadata",
                json.dumps(_metadata(tmp_path, server)),
                "--output_path",
                str(tmp_path / "out"),
            ],
            cwd=tmp_path,
        )
        _assert_quiet(proc, server.count())
    results, _ = find_results(tmp_path / "out")
    assert set(results["results"]) == {
        "emsqa_private",
        "medicationqa",
        "emrqa_smoking",
        "emrqa_emrql_1",
    }  # every task ran


@pytest.mark.e2e
def test_plain_lm_eval_with_the_tiny_model_prints_no_pack_warnings(tmp_path, tiny_model):
    tasks_dir = run_cli(["tasks-path"], cwd=tmp_path).stdout.strip()
    with FakeJudgeServer() as server:
        proc = run_lm_eval_cli(
            [
                "--include_path",
                tasks_dir,
                "--tasks",
                "medicationqa",
                "emsqa_private",
                "--model",
                "hf",
                "--model_args",
                f"pretrained={tiny_model}",
                "--device",
                "cpu",
                "--batch_size",
                "4",
                "--limit",
                "4",
                "--gen_kwargs",
                "max_gen_toks=8",
                "--metadata",
                json.dumps(_metadata(tmp_path, server)),
            ],
            cwd=tmp_path,
        )
        _assert_quiet(proc, server.count(), medeval_run=False)
