"""How long `medeval run` takes to refuse a command before any model is built (issue 23).

Prints, each the median of 3 fresh processes (wall and CPU seconds, exit status, number of problem lines):
- `--tasks medeval` (the tag: every task) with no data set, the Hub off: every missing source at once and
  the "run these instead" line;
- the same with a local model folder that does not exist (the model is checked first);
- a Hub id as the model while the Hub is off and the id is not in an empty cache.

Environment: nothing beyond the command's own; the Hub is switched off for every run.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def measure(args: list[str], env: dict[str, str]) -> dict[str, float]:
    runs = []
    for _ in range(3):
        before = os.times()
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "medeval_metrics.cli", "run", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - started
        after = os.times()
        cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
        lines = [line for line in proc.stderr.splitlines() if line.startswith("medeval: error:")]
        runs.append({"wall_s": wall, "cpu_s": cpu, "exit": proc.returncode, "problems": len(lines)})
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


def run() -> list[str]:
    """One line per case (the section ``scripts/benchmark.py`` runs)."""
    lines = []
    with tempfile.TemporaryDirectory() as work:
        model = Path(work) / "model"
        model.mkdir()
        (model / "config.json").write_text("{}")
        empty_cache = {**ENV, "HF_HOME": str(Path(work) / "hf"), "HF_HUB_CACHE": str(Path(work) / "hf" / "hub")}
        cases = {
            "--tasks medeval, no data": (
                ["--tasks", "medeval", "--model", "hf", "--model_args", f"pretrained={model}"],
                ENV,
            ),
            "--tasks medeval, model folder missing": (
                ["--tasks", "medeval", "--model", "hf", "--model_args", f"pretrained={Path(work) / 'none'}"],
                ENV,
            ),
            "Hub id, Hub off, empty cache": (
                ["--tasks", "emsqa_public", "--model", "hf", "--model_args", "pretrained=Qwen/Qwen2.5-0.5B-Instruct"],
                empty_cache,
            ),
        }
        for name, (args, env) in cases.items():
            lines.append(f"{name}: {json.dumps(measure(args, env))}")
    return lines


def main() -> int:
    for line in run():
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
