"""What a user waits for before and around the model: `medeval run` start-up and the pack's share.

Prints, measured in this one run:
- `medeval run` with the pack-only task index vs lm-eval's full index (MEDEVAL_FULL_TASK_INDEX=1):
  the same scripted emsqa_private run, paired and interleaved, median wall and CPU ratio and the
  difference in peak memory;
- the pack's share of an `emsqa_public` run with the tiny model on 40 items, as the median of
  5 runs (each in a fresh process; pack time = the pack's entry points, callees included) with the
  validated data cached, and the first run before it was (an empty MEDEVAL_DATASET_CACHE).

``profile()`` (``python scripts/benchmark.py --profile``) prints instead the top pack-owned costs:
cProfile of the 40-item tiny-model run restricted to functions in ``medeval_metrics``, and
``python -X importtime`` of each benchmark's modules, pack modules only.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURE = REPO / "tests" / "fixtures" / "emsqa_synthetic.json"
EMSQA = Path(os.environ.get("MEDEVAL_EMSQA_PUBLIC_PATH", REPO.parent / "shared" / "data" / "emsqa"))
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

# `medeval run` in a child that reports its own CPU time and peak memory when it exits.
_MEASURED_RUN = """
import atexit, json, resource, sys, time
start = time.perf_counter()
def report():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print("MEASURED " + json.dumps({"wall": time.perf_counter() - start, "cpu": usage.ru_utime + usage.ru_stime,
                                    "rss_mib": usage.ru_maxrss / 1024}), file=sys.stderr)
atexit.register(report)
from medeval_metrics.cli import main
code = main(sys.argv[1:])
sys.stdout.flush()
raise SystemExit(code)
"""

_PACK_SHARE = """
import json, sys
sys.path.insert(0, {scripts!r})
import bench_emsqa
wall, inside = bench_emsqa._pack_share_of_run()
print("SHARE " + json.dumps({{"wall": wall, "pack": inside}}))
"""


def _measured(args: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    proc = subprocess.run(
        [sys.executable, "-c", _MEASURED_RUN, *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"medeval run failed: {proc.stderr[-2000:]}")
    line = next(line for line in proc.stderr.splitlines() if line.startswith("MEASURED "))
    return json.loads(line[len("MEASURED ") :])


def startup_ratio(pairs: int = 3) -> list[str]:
    """Pack-only index vs full index for one scripted `medeval run` (no model weights: start-up dominates)."""
    with tempfile.TemporaryDirectory() as tmp:
        table = Path(tmp) / "table.json"
        table.write_text(json.dumps({"key": "question", "generate": {}, "default": '["a"]'}))
        args = [
            "run",
            "--model",
            "medeval-scripted",
            "--model_args",
            f"table={table}",
            "--tasks",
            "emsqa_private",
            "--metadata",
            json.dumps({"emsqa_private_path": str(FIXTURE)}),
        ]
        runs: dict[str, list[dict[str, float]]] = {"pack": [], "full": []}
        for _ in range(pairs):  # interleaved: machine noise hits both alike
            runs["pack"].append(_measured(args, ENV, Path(tmp)))
            runs["full"].append(_measured(args, {**ENV, "MEDEVAL_FULL_TASK_INDEX": "1"}, Path(tmp)))
    med = {k: {m: statistics.median(r[m] for r in v) for m in ("wall", "cpu", "rss_mib")} for k, v in runs.items()}
    return [
        f"`medeval run` (scripted emsqa_private, 12 items), pack-only index vs full index, median of {pairs} pairs: "
        f"wall {med['pack']['wall']:.2f} s vs {med['full']['wall']:.2f} s = {med['pack']['wall'] / med['full']['wall']:.2f}x; "
        f"CPU {med['pack']['cpu']:.2f} s vs {med['full']['cpu']:.2f} s = {med['pack']['cpu'] / med['full']['cpu']:.2f}x; "
        f"peak memory {med['full']['rss_mib'] - med['pack']['rss_mib']:.0f} MiB less",
    ]


def pack_share(runs: int = 5) -> list[str]:
    """The pack's share of a tiny-model run: once with an empty data cache (the first run on a machine),
    then ``runs`` fresh processes with it filled (every later run), as the median."""
    if not (EMSQA / "test_open.json").exists():
        return [f"pack share skipped: no EMSQA data at {EMSQA} (set MEDEVAL_EMSQA_PUBLIC_PATH)"]

    def one_run(env: dict[str, str]) -> dict[str, float]:
        proc = subprocess.run(
            [sys.executable, "-c", _PACK_SHARE.format(scripts=str(REPO / "scripts"))],
            env=env,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        line = next(line for line in proc.stdout.splitlines() if line.startswith("SHARE "))
        return json.loads(line[len("SHARE ") :])

    with tempfile.TemporaryDirectory() as cache:
        env = {**ENV, "MEDEVAL_DATASET_CACHE": cache}
        cold = one_run(env)
        warm = [one_run(env) for _ in range(runs)]
    shares = [r["pack"] / r["wall"] for r in warm]
    return [
        f"emsqa_public, tiny model, 40 items: pack code {statistics.median(shares):.1%} of the run "
        f"(median of {runs} fresh runs; range {min(shares):.1%}-{max(shares):.1%}; wall median "
        f"{statistics.median(r['wall'] for r in warm):.2f} s; pack median "
        f"{statistics.median(r['pack'] for r in warm) * 1000:.0f} ms) -- target < 5%",
        f"  the first run on a machine (validated data not yet cached): pack code {cold['pack'] / cold['wall']:.1%} "
        f"({cold['pack'] * 1000:.0f} ms of {cold['wall']:.2f} s)",
    ]


def run() -> list[str]:
    return startup_ratio() + pack_share()


# --------------------------------------------------------------------------- profile mode

_PROFILED_RUN = """
import cProfile, json, pstats, sys
sys.path.insert(0, {scripts!r})
import bench_emsqa
profiler = cProfile.Profile()
profiler.enable()
wall, _ = bench_emsqa._pack_share_of_run()
profiler.disable()
stats = pstats.Stats(profiler)
rows = []
for (filename, line, name), (cc, nc, tottime, cumtime, callers) in stats.stats.items():
    if "/medeval_metrics/" in filename.replace("\\\\", "/") and "/testing/" not in filename.replace("\\\\", "/"):
        rows.append((cumtime, tottime, nc, filename.split("medeval_metrics", 1)[1].lstrip("/\\\\") + ":" + str(line), name))
print("PROFILE " + json.dumps({{"wall": wall, "rows": sorted(rows, reverse=True)[:{top}],
                               "self_total": sum(r[1] for r in rows)}}))
"""

IMPORT_TARGETS = {
    "emsqa": "medeval_metrics.emsqa",
    "medicationqa": "medeval_metrics.medicationqa",
    "emrqa": "medeval_metrics.emrqa.tasks",
    "judge": "medeval_metrics.judge.filter",
    "report": "medeval_metrics.report",
    "cli": "medeval_metrics.cli",
}
_IMPORT_LINE = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")


def import_costs(module: str, top: int = 5) -> tuple[float, float, list[tuple[int, str]]]:
    """(pack-owned self µs total, everything µs, top pack modules by self time) of importing ``module``,
    after lm-eval itself is loaded (as in a run)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import lm_eval.api.task; import {module}"],
        env=ENV,
        capture_output=True,
        text=True,
    )
    pack, total, rows, after_lm_eval = 0, 0, [], False
    for line in proc.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if not match:
            continue
        self_us, name = int(match.group(1)), match.group(4)
        if name == "lm_eval.api.task":
            after_lm_eval = True
            continue
        if not after_lm_eval:
            continue
        total += self_us
        if name.startswith("medeval_metrics"):
            pack += self_us
            rows.append((self_us, name))
    return pack, total, sorted(rows, reverse=True)[:top]


def profile(top: int = 15) -> list[str]:
    lines = []
    if (EMSQA / "test_open.json").exists():
        proc = subprocess.run(
            [sys.executable, "-c", _PROFILED_RUN.format(scripts=str(REPO / "scripts"), top=top)],
            env=ENV,
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(proc.stderr[-2000:])
        result = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("PROFILE "))[len("PROFILE ") :])
        lines.append(
            f"cProfile, emsqa_public tiny model 40 items ({result['wall']:.2f} s wall under the profiler); "
            f"self time in pack functions: {result['self_total']:.3f} s. Top pack functions by cumulative time:"
        )
        lines.append(f"  {'cum s':>7} {'self s':>7} {'calls':>7}  function")
        for cum, self_time, calls, where, name in result["rows"]:
            lines.append(f"  {cum:7.3f} {self_time:7.3f} {calls:7d}  {name} ({where})")
    else:
        lines.append(f"cProfile skipped: no EMSQA data at {EMSQA}")
    lines.append("import time after lm-eval is loaded (python -X importtime), pack modules' own time:")
    for label, module in IMPORT_TARGETS.items():
        pack, total, rows = import_costs(module)
        worst = ", ".join(f"{name} {us / 1000:.1f} ms" for us, name in rows[:3])
        lines.append(f"  {label:<13} pack {pack / 1000:6.1f} ms of {total / 1000:7.1f} ms imported; top: {worst}")
    return lines


if __name__ == "__main__":
    for line in profile() if "--profile" in sys.argv else run():
        print(line)
