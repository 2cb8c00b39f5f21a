"""Quiet runs (issue 13, item 8): a normal run of the pack's tasks prints none of the warnings the pack's
own configuration used to cause, under `medeval run` and under plain `lm_eval --include_path`.

Known ones, each with its fix in ``medeval_metrics.lm_eval_compat``: lm-eval's per-task custom_dataset
notice (9), "No aggregation function defined" for the per-judge ``judge_success_<judge>`` metrics (8),
and "Cannot determine EOS string" from each chat-API judge (4, ``api_request_payload``)."""

from __future__ import annotations

import json
import re

import pytest
from conftest import FIXTURES, SHARED_DATA, find_results, run_cli, run_lm_eval_cli

from medeval_metrics.emrqa.synthetic import write_synthetic
from medeval_metrics.testing.fake_judge import FakeJudgeServer

PACK_NOISE = (
    "Custom kwargs can be passed to `--metadata`",
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
    # plain lm_eval keeps its own warnings; medeval run says --limit once, in its summary line
    assert ("--limit SHOULD ONLY BE USED FOR TESTING" in text) != medeval_run
    assert ("--limit 4: a test run, not comparable scores" in text) == medeval_run
    assert [line for line in text.splitlines() if any(noise in line for noise in PACK_NOISE)] == []
    # the per-judge metrics now have a direction: an arrow in the table
    assert re.search(r"\|judge_success_a\s*\|↑\s*\|", proc.stdout) and re.search(
        r"\|judge_success_b\s*\|↑", proc.stdout
    )


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
    assert results["higher_is_better"]["medicationqa"]["judge_success_a"] is True


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
