"""MedicationQA judge panel speed: 690 answers x 3 judges against a loopback server with 100 ms latency.

Prints the wall time at the configured concurrency against the ideal (requests x latency /
concurrency) and against judging one request at a time, and the requests an immediate re-run
makes (must be 0: everything comes from the cache), and the requests two runs started together on one
cache make (one per verdict: the runs' claims). The one-at-a-time baseline is measured on a subset and
extrapolated, to keep the benchmark under two minutes; the output says so.
Then the judge grid (issue 15): latency x concurrency against a fake judge server in its own
process, each cell's wall time as a ratio to the ideal (requests x latency / concurrency), requests
per second, and the CPU per request of the judge client (this process) and of the server; then the
worst ratios against the targets (<= 1.2x at latency >= 100 ms and concurrency <= 32, <= 1.3x at
c128) and the worst client CPU per request (target <= 1 ms); and the cache lookup of one run's keys with 10^3 and 10^5 verdicts
cached (the ratio shows whether lookup grows with the cache).
With BENCH_MQA_GRID_BASELINE=<git revision> each cell is measured for this tree and for that commit (its
``git archive`` in a temporary folder), alternately, each in a process of its own against the same server,
and the ratio of the two is printed: before/after figures from one run on one machine.
BENCH_MQA_GRID_REPEATS=N measures each cell N times and prints the median (and the range).
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
BENCH_MQA_GRID_CONCURRENCY (8,32,128), BENCH_MQA_GRID_REPEATS (1), BENCH_MQA_GRID_BASELINE (none).
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

        shared = shared_cache_requests(server, concurrency, str(Path(tmp) / "shared.sqlite"))

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
    lines.append(shared)
    lines.append(
        f"(the fake server runs in this process and shares its {os.cpu_count()} CPU cores with the judge client; "
        f"load average {os.getloadavg()[0]:.1f})"
    )
    return [*lines, *cache_growth(), *grid()]


def shared_cache_requests(server, concurrency: int, cache: str, n_items: int = 100) -> str:
    """Two runs started together on one cache (threads, each with its own connections): the requests the
    judges receive, against the verdicts there are (claims: one set, not two)."""
    import threading

    from medeval_metrics.judge.runner import JudgeItem, PanelRunner
    from medeval_metrics.medicationqa import RUBRIC

    items = [JudgeItem(f"shared {i}", "reference", f"answer {i}") for i in range(n_items)]
    runners = [PanelRunner(_panel(server.url, concurrency, cache), RUBRIC) for _ in range(2)]
    start = threading.Barrier(2)

    def run(runner) -> None:
        start.wait()
        runner.judge(items, progress=False)

    before, wall = server.count(), time.perf_counter()
    threads = [threading.Thread(target=run, args=(runner,)) for runner in runners]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    made, verdicts = server.count() - before, n_items * len(JUDGES)
    return (
        f"two runs at once on one cache: {made} requests for {verdicts} verdicts "
        f"({made / verdicts:.2f} per verdict, target 1.00), both done in {time.perf_counter() - wall:.2f} s"
    )


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


# One grid cell in a process of its own, for the working tree or a baseline checkout (whichever tree the
# process imports): reads {"url", "concurrency", "items", "tag"} lines, answers {"wall", "cpu"} lines. Only
# long-standing names are used, so that older commits run it too.
_CELL_WORKER = """
import json, logging, sys, time
logging.getLogger("lm_eval").setLevel(logging.ERROR)
from medeval_metrics.judge.config import panel_from_obj
from medeval_metrics.judge.runner import JudgeItem, PanelRunner
from medeval_metrics.medicationqa import RUBRIC
print("ready", flush=True)
for line in sys.stdin:
    cell = json.loads(line)
    judges = [{"name": m, "backend": "local-chat-completions", "model": m, "base_url": cell["url"]}
              for m in ("judge-gpt", "judge-llama", "judge-claude")]
    panel = panel_from_obj({"judges": judges, "concurrency": cell["concurrency"], "cache": None}, "benchmark")
    items = [JudgeItem(f"{cell['tag']} {i}", "reference", f"answer {i}") for i in range(cell["items"])]
    runner = PanelRunner(panel, RUBRIC)
    cpu, wall = time.process_time(), time.perf_counter()
    runner.judge(items, progress=False)
    print(json.dumps({"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu}), flush=True)
"""


class _CellProcess:
    """A ``_CELL_WORKER`` importing the pack from ``root`` (its working directory comes first on its path)."""

    def __init__(self, root: Path) -> None:
        import subprocess

        env = {**os.environ, "PYTHONPATH": str(root)}
        self.process = subprocess.Popen(
            [sys.executable, "-c", _CELL_WORKER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=root,
            env=env,
        )
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the grid's cell process for {root} did not start")

    def cell(self, url: str, concurrency: int, n_items: int, tag: str) -> tuple[float, float]:
        import json

        self.process.stdin.write(json.dumps({"url": url, "concurrency": concurrency, "items": n_items, "tag": tag}))
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        answer = json.loads(self.process.stdout.readline())
        return answer["wall"], answer["cpu"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait()


def _checkout(revision: str, into: Path) -> str:
    """``revision``'s tree (git archive) in ``into``; its short hash."""
    import io
    import subprocess
    import tarfile

    root = Path(__file__).resolve().parent.parent
    short = subprocess.run(
        ["git", "rev-parse", "--short", revision], cwd=root, capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = subprocess.run(["git", "archive", revision], cwd=root, capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return short


def grid() -> list[str]:
    from medeval_metrics.judge.runner import JudgeItem, PanelRunner
    from medeval_metrics.medicationqa import RUBRIC

    requests = int(os.environ.get("BENCH_MQA_GRID_REQUESTS", "600"))
    if requests <= 0:
        return []
    latencies = [int(x) / 1000 for x in os.environ.get("BENCH_MQA_GRID_LATENCIES_MS", "20,100,500").split(",")]
    concurrencies = [int(x) for x in os.environ.get("BENCH_MQA_GRID_CONCURRENCY", "8,32,128").split(",")]
    repeats = max(1, int(os.environ.get("BENCH_MQA_GRID_REPEATS", "1")))
    baseline = os.environ.get("BENCH_MQA_GRID_BASELINE", "").strip()
    n_items = max(1, requests // len(JUDGES))
    n_requests = n_items * len(JUDGES)

    def in_process(url: str, concurrency: int, n: int, tag: str) -> tuple[float, float]:
        items = [JudgeItem(f"{tag} {i}", "reference", f"answer {i}") for i in range(n)]
        runner = PanelRunner(_panel(url, concurrency, None), RUBRIC)  # no cache: every verdict is a request
        cpu, wall = time.process_time(), time.perf_counter()
        runner.judge(items, progress=False)
        return time.perf_counter() - wall, time.process_time() - cpu

    with tempfile.TemporaryDirectory() as tmp:
        arms: dict[str, object] = {}
        workers: list[_CellProcess] = []
        if baseline:  # both arms in processes of their own, measured alternately on the same server
            short = _checkout(baseline, Path(tmp))
            workers = [_CellProcess(Path(__file__).resolve().parent.parent), _CellProcess(Path(tmp))]
            arms = {"this tree": workers[0].cell, f"baseline {short}": workers[1].cell}
        else:
            arms = {"this tree": in_process}
        try:
            return _grid_table(arms, latencies, concurrencies, repeats, n_items, n_requests)
        finally:
            for worker in workers:
                worker.close()


def _grid_table(arms, latencies, concurrencies, repeats, n_items, n_requests) -> list[str]:
    import statistics

    lines = [
        f"judge grid: {n_requests} requests per cell, server in its own process (TCP_NODELAY); "
        "wall / ideal, requests per second (client CPU | server CPU, ms per request)"
        + (f"; median of {repeats} runs per cell, arms alternating" if repeats > 1 or len(arms) > 1 else ""),
        "| latency | " + " | ".join(f"c{c}" for c in concurrencies) + " |",
        "|---|" + "---|" * len(concurrencies),
    ]
    names = list(arms)
    worst: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    client_cpu: dict[str, list[float]] = {name: [] for name in names}
    compared: list[str] = []
    for latency in latencies:
        process, url = _server_process(latency)
        try:
            cells: dict[str, list[str]] = {name: [] for name in names}
            for concurrency in concurrencies:
                ideal = n_requests * latency / concurrency
                runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}
                for repeat in range(repeats):
                    order = names if repeat % 2 == 0 else names[::-1]
                    for name in order:
                        server_cpu = _process_cpu_s(process.pid)
                        wall, cpu = arms[name](
                            url, concurrency, n_items, f"grid {latency} {concurrency} {repeat} {name}"
                        )
                        server_after = _process_cpu_s(process.pid)
                        server_ms = (
                            float("nan")
                            if server_cpu is None or server_after is None
                            else (server_after - server_cpu) * 1000 / n_requests
                        )
                        runs[name].append((wall / ideal, cpu * 1000 / n_requests, server_ms))
                medians = {}
                for name in names:
                    ratios = [r for r, _, _ in runs[name]]
                    ratio = statistics.median(ratios)
                    medians[name] = ratio
                    cpu_ms = statistics.median(c for _, c, _ in runs[name])
                    server_ms = statistics.median(s for _, _, s in runs[name])
                    client_cpu[name].append(cpu_ms)
                    spread = f" ({min(ratios):.2f}-{max(ratios):.2f})" if repeats > 1 else ""
                    cells[name].append(
                        f"{ratio:.2f}x{spread}, {n_requests / (ratio * ideal):.0f}/s ({cpu_ms:.2f} | {server_ms:.2f})"
                    )
                    if latency >= 0.1:
                        group = "c<=32" if concurrency <= 32 else f"c{concurrency}"
                        worst[name].setdefault(group, []).append(ratio)
                if len(names) == 2:
                    compared.append(
                        f"{latency * 1000:.0f} ms c{concurrency}: {medians[names[0]] / medians[names[1]]:.2f}"
                    )
            for name in names:
                label = f"{latency * 1000:.0f} ms" + (f" ({name})" if len(names) > 1 else "")
                lines.append(f"| {label} | " + " | ".join(cells[name]) + " |")
        finally:
            process.terminate()
            process.wait()
    targets = {"c<=32": 1.2, "c128": 1.3}
    for name in names:
        lines.append(
            "worst wall / ideal at latency >= 100 ms"
            + (f" ({name})" if len(names) > 1 else "")
            + ": "
            + ", ".join(
                f"{group} {max(ratios):.2f}x (target <= {targets.get(group, float('nan'))}x)"
                for group, ratios in worst[name].items()
            )
        )
    if compared:
        lines.append(f"{names[0]} / {names[1]}, wall / ideal per cell: " + ", ".join(compared))
    lines.append(
        "client CPU per request: at most "
        + ", ".join(f"{max(cpus):.2f} ms ({name})" for name, cpus in client_cpu.items())
        + f" (target <= 1 ms); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
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
