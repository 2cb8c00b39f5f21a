"""MedicationQA judge panel speed: 690 answers x 3 judges against a loopback server with 100 ms latency.

Prints the wall time at the configured concurrency against the ideal (requests x latency /
concurrency) and against judging one request at a time, and the requests an immediate re-run
makes (must be 0: everything comes from the cache). The one-at-a-time baseline is measured on a
subset and extrapolated, to keep the benchmark under two minutes; the output says so.
Then the judge grid (issue 15): latency x concurrency against a fake judge server in its own
process, each cell's wall time as a ratio to the ideal (requests x latency / concurrency), requests
per second, and the CPU per request of the judge client (this process) and of the server; then the
worst ratios against the targets (<= 1.2x at latency >= 100 ms and concurrency <= 32, <= 1.6x at
c128) and the worst client CPU per request (target <= 1 ms); and the cache lookup of one run's keys with 10^3 and 10^5 verdicts
cached (the ratio shows whether lookup grows with the cache).
The grid's server is ``testing.fake_judge`` in a process of its own: an asyncio server on one event
loop (keep-alive, TCP_NODELAY, each reply written when its latency timer fires, timers waited in
microseconds rather than epoll's milliseconds), because real judge
endpoints (vLLM, OpenAI-compatible servers on uvicorn or aiohttp) are async servers; a
thread-per-connection server spent about 1 ms starting each connection's thread, which at c128
delayed the whole first round and was counted as the client's time. The two share the machine's
cores: at c128 and 100 ms the pair must sustain 1,280 requests per second, so both CPU columns count.
At 600 requests a c128 cell is 4.7 rounds of requests, run as 5: 1.07x is its floor.
Environment knobs: BENCH_MQA_ITEMS (690), BENCH_MQA_CONCURRENCY (32), BENCH_MQA_SEQUENTIAL_SAMPLE (30),
BENCH_MQA_GRID_REQUESTS (600 per cell; 0 skips the grid), BENCH_MQA_GRID_LATENCIES_MS (20,100,500),
BENCH_MQA_GRID_CONCURRENCY (8,32,128).
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
        {
            "judges": [{"name": m, "backend": "local-chat-completions", "model": m, "base_url": url} for m in JUDGES],
            "concurrency": concurrency,
            "cache": cache,
        },
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
    items = [
        JudgeItem(f"question {i} about drug{i % 97}", f"reference answer {i}", f"model answer {i}")
        for i in range(n_items)
    ]
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

        subset = [
            JudgeItem(f"sequential {i}", "reference", f"answer {i}") for i in range(max(1, sample // len(JUDGES)))
        ]
        before = server.count()
        start = time.perf_counter()
        PanelRunner(_panel(server.url, 1, str(Path(tmp) / "sequential.sqlite")), RUBRIC).judge(subset, progress=False)
        per_request = (time.perf_counter() - start) / (server.count() - before)
        sequential_s = per_request * requests

    ideal_s = requests * LATENCY / concurrency
    lines.append(
        f"{n_items} answers x {len(JUDGES)} judges = {requests} requests, {LATENCY * 1000:.0f} ms latency, "
        f"concurrency {concurrency} (server saw {made} requests, max {server.max_in_flight} in flight)"
    )
    lines.append(
        f"concurrent: {concurrent_s:.2f} s; ideal {ideal_s:.2f} s -> {concurrent_s / ideal_s:.2f}x ideal (target <= 1.5x)"
    )
    lines.append(
        f"one request at a time: {sequential_s:.1f} s (extrapolated from {server.count() - before} requests at "
        f"{per_request * 1000:.0f} ms each) -> concurrent is {sequential_s / concurrent_s:.1f}x faster"
    )
    lines.append(f"immediate re-run: {rerun_requests} requests (must be 0), {rerun_s:.2f} s")
    lines.append(
        f"(the fake server runs in this process and shares its {os.cpu_count()} CPU cores with the judge client; "
        f"load average {os.getloadavg()[0]:.1f})"
    )
    return [*lines, *cache_growth(), *grid()]


# In a process of its own, so that its CPU is counted apart from the client's (see the docstring).
def _server_process(latency: float):
    import subprocess

    process = subprocess.Popen(
        [sys.executable, "-m", "medeval_metrics.testing.fake_judge", "--latency", str(latency)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return process, process.stdout.readline().strip()


def _process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc; None elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def grid() -> list[str]:
    from medeval_metrics.judge.runner import JudgeItem, PanelRunner
    from medeval_metrics.medicationqa import RUBRIC

    requests = int(os.environ.get("BENCH_MQA_GRID_REQUESTS", "600"))
    if requests <= 0:
        return []
    latencies = [int(x) / 1000 for x in os.environ.get("BENCH_MQA_GRID_LATENCIES_MS", "20,100,500").split(",")]
    concurrencies = [int(x) for x in os.environ.get("BENCH_MQA_GRID_CONCURRENCY", "8,32,128").split(",")]
    n_items = max(1, requests // len(JUDGES))
    n_requests = n_items * len(JUDGES)
    lines = [
        f"judge grid: {n_requests} requests per cell, server in its own process (TCP_NODELAY); "
        "wall / ideal, requests per second (client CPU | server CPU, ms per request)",
        "| latency | " + " | ".join(f"c{c}" for c in concurrencies) + " |",
        "|---|" + "---|" * len(concurrencies),
    ]
    worst: dict[str, float] = {}
    client_cpu: list[float] = []
    for latency in latencies:
        process, url = _server_process(latency)
        try:
            cells = []
            for concurrency in concurrencies:
                items = [
                    JudgeItem(f"grid {latency} {concurrency} {i}", "reference", f"answer {i}") for i in range(n_items)
                ]
                runner = PanelRunner(_panel(url, concurrency, None), RUBRIC)  # no cache: every verdict is a request
                server_cpu = _process_cpu_s(process.pid)
                cpu, wall = time.process_time(), time.perf_counter()
                runner.judge(items, progress=False)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                server_after = _process_cpu_s(process.pid)
                server_ms = (
                    "?"
                    if server_cpu is None or server_after is None
                    else f"{(server_after - server_cpu) * 1000 / n_requests:.2f}"
                )
                ratio = wall / (n_requests * latency / concurrency)
                client_cpu.append(cpu * 1000 / n_requests)
                if latency >= 0.1:
                    group = "c<=32" if concurrency <= 32 else f"c{concurrency}"
                    worst[group] = max(worst.get(group, 0.0), ratio)
                cells.append(f"{ratio:.2f}x, {n_requests / wall:.0f}/s ({client_cpu[-1]:.2f} | {server_ms})")
            lines.append(f"| {latency * 1000:.0f} ms | " + " | ".join(cells) + " |")
        finally:
            process.terminate()
            process.wait()
    targets = {"c<=32": 1.2, "c128": 1.6}
    lines.append(
        "worst wall / ideal at latency >= 100 ms: "
        + ", ".join(
            f"{group} {ratio:.2f}x (target <= {targets.get(group, float('nan'))}x)" for group, ratio in worst.items()
        )
    )
    lines.append(
        f"client CPU per request: at most {max(client_cpu):.2f} ms (target <= 1 ms); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    return lines


def cache_growth() -> list[str]:
    from medeval_metrics.judge.cache import VerdictCache

    lookups = [f"lookup-{i}" for i in range(2070)]
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in (10**3, 10**5):
            cache = VerdictCache(Path(tmp) / f"c{size}.sqlite")
            cache.put_many((f"filler-{i}", {"scores": {"accuracy": 3}}) for i in range(size))
            cache.put_many((key, {"scores": {"accuracy": 4}}) for key in lookups[::2])
            cache.get_many(lookups[:100])  # warm the connection and the page cache
            start = time.perf_counter()
            hits = cache.get_many(lookups)
            out[size] = (time.perf_counter() - start, len(hits))
    (small, n_small), (large, _) = out[10**3], out[10**5]
    return [
        f"cache lookup of {len(lookups)} keys ({n_small} hits): {small * 1000:.1f} ms with 10^3 cached, "
        f"{large * 1000:.1f} ms with 10^5 -> {large / small:.2f}x for 100x the cache"
    ]


if __name__ == "__main__":
    for line in run():
        print(line)
