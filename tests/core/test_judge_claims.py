"""Runs sharing one judge cache pay once per verdict (issue 32): a run claims the keys it asks for, another
run waits for the verdicts the claimant stores, and a claim whose lease ran out (a killed run) is taken over.
Counted by the requests the fake judge server receives; the two-process version is the e2e test below."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from medeval_metrics.judge import cache as cache_module
from medeval_metrics.judge import runner as runner_module
from medeval_metrics.judge.cache import VerdictCache, cache_key
from medeval_metrics.judge.config import panel_from_obj
from medeval_metrics.judge.runner import JudgeItem, PanelRunner
from medeval_metrics.medicationqa import RUBRIC
from medeval_metrics.testing.fake_judge import FakeJudgeServer, default_scores

ITEMS = [JudgeItem(f"question {i}", f"reference {i}", f"answer {i}") for i in range(6)]
MODELS = ("m1", "m2")


def _panel(url, cache_path, concurrency=2):
    return panel_from_obj(
        {
            "judges": [{"name": m, "backend": "local-chat-completions", "model": m, "base_url": url} for m in MODELS],
            "cache": str(cache_path),
            "concurrency": concurrency,
            "backoff_base": 0.001,
            "backoff_max": 0.001,
        },
        "test",
    )


def _keys(runner):
    return [
        cache_key(judge.identity(), runner.rubric_key, RUBRIC.messages(i.question, i.reference, i.answer))
        for i in ITEMS
        for judge in runner.panel.judges
    ]


def _all_scored(out):
    return all(row[m]["scores"] == default_scores(m, ITEMS[i].question) for i, row in enumerate(out) for m in MODELS)


@pytest.fixture(autouse=True)
def _quick_polls(monkeypatch):
    monkeypatch.setattr(runner_module, "CLAIM_POLL_S", 0.02)


def test_two_runs_at_once_on_one_cache_ask_once(tmp_path):
    # two runs in threads, each with its own cache connections, started together: 6 items x 2 judges is 12
    # requests in all (24 before claims: each run asked for every verdict)
    cache_path = tmp_path / "shared.sqlite"
    outs: dict[int, list] = {}
    start = threading.Barrier(2)
    with FakeJudgeServer(latency=0.1) as server:

        def run(n: int) -> None:
            runner = PanelRunner(_panel(server.url, cache_path), RUBRIC)
            start.wait()
            outs[n] = runner.judge(ITEMS, progress=False)

        threads = [threading.Thread(target=run, args=(n,)) for n in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert server.count() == len(ITEMS) * len(MODELS)
    assert _all_scored(outs[0]) and _all_scored(outs[1])
    # each verdict was asked by one run and read from the cache by the other
    requests = [sum(row[m]["requests"] for row in outs[n] for m in MODELS) for n in range(2)]
    assert sorted(requests) == [0, 12]
    fresh = [row[m]["cached"] for n in range(2) for row in outs[n] for m in MODELS]
    assert fresh.count(False) == 12 and fresh.count(True) == 12
    assert VerdictCache(cache_path).claims(_keys(PanelRunner(_panel(server.url, cache_path), RUBRIC))) == {}


def test_a_claim_whose_lease_ran_out_is_taken_over_at_once(tmp_path):
    cache_path = tmp_path / "shared.sqlite"
    with FakeJudgeServer() as server:
        runner = PanelRunner(_panel(server.url, cache_path), RUBRIC)
        keys = _keys(runner)
        # a run killed mid-judging left its claims; their leases ended a second ago
        VerdictCache(cache_path).claim(keys, "killed-host:1234:0", lease_s=-1.0)
        started = time.monotonic()
        out = runner.judge(ITEMS, progress=False)
        assert time.monotonic() - started < 5.0
        assert server.count() == 12
    assert _all_scored(out)
    assert VerdictCache(cache_path).claims(keys) == {}  # this run's claims ended with its verdicts


def test_a_live_claim_is_waited_for_until_its_lease_runs_out(tmp_path):
    cache_path = tmp_path / "shared.sqlite"
    with FakeJudgeServer() as server:
        runner = PanelRunner(_panel(server.url, cache_path), RUBRIC)
        keys = _keys(runner)
        # another run holds the first item's keys for 0.6 s more and then dies without storing anything
        VerdictCache(cache_path).claim(keys[:2], "other-host:99:0", lease_s=0.6)
        started = time.monotonic()
        out = runner.judge(ITEMS, progress=False)
        waited = time.monotonic() - started
        assert server.count() == 12  # every verdict once: the claimed two after the lease ran out
    assert waited >= 0.5
    assert _all_scored(out)


def test_a_waiting_run_takes_the_verdicts_the_claimant_stores(tmp_path):
    cache_path = tmp_path / "shared.sqlite"
    with FakeJudgeServer() as server:
        claimant = PanelRunner(_panel(server.url, cache_path), RUBRIC)
        keys = _keys(claimant)
        VerdictCache(cache_path).claim(keys, "claimant", lease_s=30.0)
        stored = {"scores": {"accuracy": 3, "completeness": 3, "clarity": 3}, "reply": None, "reasons": {}}

        def claimant_finishes() -> None:
            time.sleep(0.3)
            VerdictCache(cache_path).put_many([(key, stored) for key in keys], "claimant")

        thread = threading.Thread(target=claimant_finishes)
        thread.start()
        out = PanelRunner(_panel(server.url, cache_path), RUBRIC).judge(ITEMS, progress=False)
        thread.join()
        assert server.count() == 0
    assert all(row[m]["scores"] == stored["scores"] and row[m]["cached"] for row in out for m in MODELS)
    assert VerdictCache(cache_path).claims(keys) == {}  # the stored verdicts ended the claims


def test_a_claim_ended_without_a_verdict_is_asked_by_the_waiting_run(tmp_path):
    cache_path = tmp_path / "shared.sqlite"
    with FakeJudgeServer() as server:
        runner = PanelRunner(_panel(server.url, cache_path), RUBRIC)
        keys = _keys(runner)
        VerdictCache(cache_path).claim(keys, "stopped-run", lease_s=30.0)
        # the other run is stopped (Ctrl-C) before it asked: it ends its claims, storing nothing
        timer = threading.Timer(0.3, VerdictCache(cache_path).release, args=("stopped-run",))
        timer.start()
        out = runner.judge(ITEMS, progress=False)
        timer.join()
        assert server.count() == 12
    assert _all_scored(out)


def test_a_locked_cache_is_judged_unclaimed(tmp_path, monkeypatch):
    # claims are best effort: a cache another process holds locked costs the run no verdict
    import sqlite3

    monkeypatch.setattr(cache_module, "BUSY_TIMEOUT_S", 0.05)
    cache_path = tmp_path / "shared.sqlite"
    with FakeJudgeServer() as server:
        runner = PanelRunner(_panel(server.url, cache_path), RUBRIC, sleep=lambda s: None)
        holder = sqlite3.connect(cache_path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            out = runner.judge(ITEMS, progress=False)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert server.count() == 12
    assert _all_scored(out)
    runner_module.cache_failures.clear()


def test_claims_are_one_transaction_and_report_only_live_claims_of_others(tmp_path):
    cache = VerdictCache(tmp_path / "c.sqlite")
    assert cache.claim(["a", "b"], "run-1") == {}
    assert cache.claim(["b", "c"], "run-2") == {"b": "run-1"}  # c is run-2's now, b stays run-1's
    assert {k: owner for k, (owner, _) in cache.claims(["a", "b", "c"]).items()} == {
        "a": "run-1",
        "b": "run-1",
        "c": "run-2",
    }
    assert cache.claim(["a"], "run-1") == {}  # one's own claim is renewed, not reported
    cache.put_many([("a", {"scores": {"x": 1}})], "run-1")  # a stored verdict ends its claim
    assert set(cache.claims(["a", "b", "c"])) == {"b", "c"}
    cache.claim(["d"], "run-3", lease_s=-1.0)
    assert cache.claim(["d"], "run-2") == {}  # expired: taken over
    cache.release("run-2")
    assert set(cache.claims(["a", "b", "c", "d"])) == {"b"}


_CHILD = """
import json, os, sys, time
from medeval_metrics.judge.config import panel_from_obj
from medeval_metrics.judge.runner import JudgeItem, PanelRunner
from medeval_metrics.medicationqa import RUBRIC

url, cache, go = sys.argv[1:4]
panel = panel_from_obj({"judges": [{"name": m, "backend": "local-chat-completions", "model": m, "base_url": url}
                                   for m in ("m1", "m2")], "cache": cache, "concurrency": 2}, "test")
items = [JudgeItem(f"question {i}", f"reference {i}", f"answer {i}") for i in range(6)]
runner = PanelRunner(panel, RUBRIC)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.005)
out = runner.judge(items, progress=False)
print(json.dumps({"requests": sum(v["requests"] for row in out for v in row.values()),
                  "scored": sum(bool(v["scores"]) for row in out for v in row.values())}), flush=True)
"""


@pytest.mark.e2e  # two processes, as two `medeval run`s sharing ~/.cache/medeval/judge_cache.sqlite are
def test_two_processes_at_once_on_one_cache_ask_once(tmp_path):
    cache_path, go = tmp_path / "shared.sqlite", tmp_path / "go"
    with FakeJudgeServer(latency=0.2) as server:
        children = [
            subprocess.Popen(
                [sys.executable, "-c", _CHILD, server.url, str(cache_path), str(go)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        for child in children:  # both have imported lm-eval and built their judges: start them together
            assert child.stdout.readline().strip() == "ready"
        go.touch()
        reports = [json.loads(child.communicate(timeout=120)[0].strip().splitlines()[-1]) for child in children]
        assert [child.returncode for child in children] == [0, 0]
        assert server.count() == 12  # one set of verdicts (24 before claims)
    assert [r["scored"] for r in reports] == [12, 12]
    assert sum(r["requests"] for r in reports) == 12
