"""Data-parallel runs that agree: two CPU processes under torchrun give the single-process metrics.

The scripted backend's data-parallel mode joins a gloo process group, so lm-eval's evaluator
shards the docs by rank and gathers per-item metrics on rank 0 -- the same code path as a
multi-GPU ``hf`` run, without GPUs. The judge filter runs on each rank's shard, so every
(judge, item) verdict must be requested exactly once across the two ranks.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import EMSQA_SYNTHETIC as SYNTHETIC
from conftest import find_results, two_judge_panel

from medeval_metrics.testing.fake_judge import FakeJudgeServer

# 11 rows: the ranks get 6 and 5 docs, so lm-eval pads rank 1 with a repeated request
ROWS = [
    {
        "question": f"can i take drug{i} with food",
        "focus_drug": f"drug{i}",
        "question_type": ["Dose", "Usage"][i % 2],
        "answer": f"Drug{i} can be taken with or without food.",
        "section_title": "",
        "url": "",
    }
    for i in range(11)
]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _run(
    args: list[str], cwd: Path, env: dict[str, str], processes: int
) -> subprocess.CompletedProcess | SimpleNamespace:
    """``medeval run ARGS`` in this process, or under torchrun with ``processes`` ranks on loopback."""
    if processes == 1:
        from medeval_metrics.cli import main

        with pytest.MonkeyPatch.context() as patch:
            for name, value in env.items():
                patch.setenv(name, value)
            return SimpleNamespace(returncode=main(["run", *args]), stderr="(in this process: see the captured output)")
    launcher = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        str(processes),
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(_free_port()),
    ]
    return subprocess.run(
        [*launcher, "-m", "medeval_metrics.cli", "run", *args],
        cwd=cwd,
        env={**os.environ, "OMP_NUM_THREADS": "1", **env},
        capture_output=True,
        text=True,
        timeout=240,
    )


def _answered(record: Path) -> dict[str, list[str]]:
    return {p.stem: [json.loads(line) for line in p.read_text().splitlines()] for p in sorted(record.glob("rank*.txt"))}


def _scores(results: dict, task: str) -> dict:
    return {k: v for k, v in results["results"][task].items() if k not in ("alias", "samples")}


@pytest.mark.e2e  # torchrun with two processes (and one in-process run to compare)
def test_emsqa_two_ranks_equal_one(tmp_path):
    items = json.loads(SYNTHETIC.read_text())
    table = {"key": "question", "generate": {}}
    for index, item in enumerate(items):  # a mix of right, partly right and wrong answers
        gold = item["answer"] if isinstance(item["answer"], list) else [item["answer"]]
        table["generate"][item["question"]] = "Reasoning...\n" + json.dumps(gold if index % 3 == 0 else ["a", "b"])
    (tmp_path / "table.json").write_text(json.dumps(table))
    outcomes = {}
    for processes in (1, 2):
        out, record = tmp_path / f"out{processes}", tmp_path / f"record{processes}"
        args = [
            "--tasks",
            "emsqa_private",
            "--model",
            "medeval-scripted",
            "--model_args",
            f"table={tmp_path / 'table.json'},data_parallel=true,record={record}",
            "--metadata",
            json.dumps({"emsqa_private_path": str(SYNTHETIC)}),
            "--output_path",
            str(out),
            "--log_samples",
        ]
        proc = _run(args, tmp_path, {}, processes)
        assert proc.returncode == 0, proc.stderr[-3000:]
        outcomes[processes] = (find_results(out), _answered(record))
    (single, single_samples), single_answered = outcomes[1]
    (dp, dp_samples), dp_answered = outcomes[2]
    assert list(dp_answered) == ["rank0", "rank1"] and [len(v) for v in dp_answered.values()] == [6, 6]
    assert sorted(dp_answered["rank0"] + dp_answered["rank1"]) == sorted(single_answered["rank0"])
    assert dp["config"]["model_args"] and dp["n-samples"]["emsqa_private"]["effective"] == 12
    assert _scores(dp, "emsqa_private") == _scores(single, "emsqa_private")
    assert 0 < single["results"]["emsqa_private"]["acc,flexible-extract"] < 1
    for reading in ("strict-match", "flexible-extract"):  # lm-eval logs each item once per reading
        assert sorted(s["doc_id"] for s in dp_samples["emsqa_private"] if s["filter"] == reading) == list(range(12))


def _judges(server: FakeJudgeServer, cache: Path) -> str:
    return two_judge_panel(server, cache)


@pytest.mark.e2e  # torchrun with two processes (and one in-process run to compare)
def test_medicationqa_panel_two_ranks_equal_one_and_judge_each_item_once(tmp_path):
    data = tmp_path / "medicationqa.json"
    data.write_text(json.dumps(ROWS))
    table = {
        "key": "question",
        "generate": {
            r["question"]: f"Take drug{i} with food." if i % 2 else "Ask your pharmacist." for i, r in enumerate(ROWS)
        },
    }
    (tmp_path / "table.json").write_text(json.dumps(table))
    outcomes = {}
    with FakeJudgeServer() as server:  # one server: both runs' caches key verdicts by the same judge URL
        for processes in (1, 2):
            out, cache, record = (
                tmp_path / f"out{processes}",
                tmp_path / f"cache{processes}.sqlite",
                tmp_path / f"record{processes}",
            )
            env = {"MEDEVAL_JUDGES": _judges(server, cache), "MEDEVAL_MEDICATIONQA_PATH": str(data)}
            args = [
                "--tasks",
                "medicationqa",
                "--model",
                "medeval-scripted",
                "--model_args",
                f"table={tmp_path / 'table.json'},data_parallel=true,record={record}",
                "--output_path",
                str(out),
                "--log_samples",
                "--skip-judge-check",  # its one fixed request per judge would be counted as judging
            ]
            before = len(server.requests)
            proc = _run(args, tmp_path, env, processes)
            assert proc.returncode == 0, proc.stderr[-3000:]
            requests = Counter((r["model"], r["question"]) for r in server.requests[before:])
            outcomes[processes] = (find_results(out)[0], requests, cache, _answered(record))

    expected_requests = {(judge, row["question"]): 1 for judge in ("judge-a", "judge-b") for row in ROWS}
    cached = {}
    for processes, (results, requests, cache, answered) in outcomes.items():
        assert dict(requests) == expected_requests, processes  # each (judge, item) once, across ranks
        with sqlite3.connect(cache) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            cached[processes] = dict(conn.execute("SELECT key, value FROM verdicts"))
        assert len(cached[processes]) == 22 and all(json.loads(v) for v in cached[processes].values())
    # the cache two ranks wrote at once holds exactly what one process writes: same keys, same verdicts
    assert cached[2] == cached[1]
    dp_answered = outcomes[2][3]
    # rank 1 has 5 docs and is padded with a repeat of its last request to match rank 0's 6
    assert [len(v) for v in dp_answered.values()] == [6, 6] and len(set(dp_answered["rank1"])) == 5
    assert set(dp_answered["rank0"]).isdisjoint(dp_answered["rank1"])
    single, dp = outcomes[1][0], outcomes[2][0]
    # lm-eval's own `mean` (task version 5) sums in the order the ranks' items are gathered, so a mean can
    # differ from the single process's in the last bit: equal to 1e-12, everything else exactly
    dp_scores, single_scores = _scores(dp, "medicationqa"), _scores(single, "medicationqa")
    assert dp_scores.keys() == single_scores.keys()
    for key, value in single_scores.items():
        if isinstance(value, float):
            assert dp_scores[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key
        else:
            assert dp_scores[key] == value, key
    assert single["results"]["medicationqa"]["judge_computed,scored"] == 1.0
    # a corpus statistic: lm-eval has no stderr for it; the report computes one from the samples
    assert single["results"]["medicationqa"]["judge_agreement_stderr,scored"] == "N/A"


def test_agreement_stderr_does_not_depend_on_item_order():
    from medeval_metrics.judge.aggregate import agreement_stderr

    items = [[[1, 2], [3, 3]], [[5, 4], [2, 2]], [[4, 4], [1, 3]], [[2, 2], [5, 5]], [[3, 1], [4, 4]]]
    shuffled = [items[i] for i in (0, 2, 4, 1, 3)]  # the order lm-eval gathers 2 ranks in
    assert agreement_stderr(shuffled) == agreement_stderr(items) > 0
