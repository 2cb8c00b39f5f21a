"""MedicationQA judge panel speed: 690 answers x 3 judges against a loopback server with 100 ms latency.

Prints the wall time at the configured concurrency against the ideal (requests x latency /
concurrency) and against judging one request at a time, and the requests an immediate re-run
makes (must be 0: everything comes from the cache). The one-at-a-time baseline is measured on a
subset and extrapolated, to keep the benchmark under two minutes; the output says so.
Environment knobs: BENCH_MQA_ITEMS (690), BENCH_MQA_CONCURRENCY (32), BENCH_MQA_SEQUENTIAL_SAMPLE (30).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

LATENCY = 0.1
JUDGES = ("judge-gpt", "judge-llama", "judge-claude")


def _panel(url: str, concurrency: int, cache: str):
    from medeval_metrics.judge.config import panel_from_obj

    return panel_from_obj(
        {"judges": [{"name": m, "backend": "local-chat-completions", "model": m, "base_url": url} for m in JUDGES],
         "concurrency": concurrency, "cache": cache},
        "benchmark",
    )


def run() -> list[str]:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import logging

    logging.getLogger("lm_eval").setLevel(logging.ERROR)
    from medeval_metrics.judge.runner import JudgeItem, PanelRunner
    from medeval_metrics.medicationqa import RUBRIC
    from medeval_metrics.testing.fake_judge import FakeJudgeServer

    n_items = int(os.environ.get("BENCH_MQA_ITEMS", "690"))
    concurrency = int(os.environ.get("BENCH_MQA_CONCURRENCY", "32"))
    sample = int(os.environ.get("BENCH_MQA_SEQUENTIAL_SAMPLE", "30"))
    items = [JudgeItem(f"question {i} about drug{i % 97}", f"reference answer {i}", f"model answer {i}") for i in range(n_items)]
    requests = n_items * len(JUDGES)
    lines = []
    with tempfile.TemporaryDirectory() as tmp, FakeJudgeServer(latency=LATENCY) as server:
        cache = str(Path(tmp) / "cache.sqlite")
        start = time.perf_counter()
        PanelRunner(_panel(server.url, concurrency, cache), RUBRIC).judge(items, progress=False)
        concurrent_s = time.perf_counter() - start
        made = server.count()

        before = server.count()
        start = time.perf_counter()
        PanelRunner(_panel(server.url, concurrency, cache), RUBRIC).judge(items, progress=False)
        rerun_s, rerun_requests = time.perf_counter() - start, server.count() - before

        subset = [JudgeItem(f"sequential {i}", "reference", f"answer {i}") for i in range(max(1, sample // len(JUDGES)))]
        before = server.count()
        start = time.perf_counter()
        PanelRunner(_panel(server.url, 1, str(Path(tmp) / "sequential.sqlite")), RUBRIC).judge(subset, progress=False)
        per_request = (time.perf_counter() - start) / (server.count() - before)
        sequential_s = per_request * requests

    ideal_s = requests * LATENCY / concurrency
    lines.append(f"{n_items} answers x {len(JUDGES)} judges = {requests} requests, {LATENCY * 1000:.0f} ms latency, "
                 f"concurrency {concurrency} (server saw {made} requests, max {server.max_in_flight} in flight)")
    lines.append(f"concurrent: {concurrent_s:.2f} s; ideal {ideal_s:.2f} s -> {concurrent_s / ideal_s:.2f}x ideal (target <= 1.5x)")
    lines.append(f"one request at a time: {sequential_s:.1f} s (extrapolated from {server.count() - before} requests at "
                 f"{per_request * 1000:.0f} ms each) -> concurrent is {sequential_s / concurrent_s:.1f}x faster")
    lines.append(f"immediate re-run: {rerun_requests} requests (must be 0), {rerun_s:.2f} s")
    lines.append(f"(the fake server runs in this process and shares its {os.cpu_count()} CPU cores with the judge client)")
    return lines


if __name__ == "__main__":
    for line in run():
        print(line)
