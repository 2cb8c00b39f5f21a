"""Run every benchmark section (scripts/bench_*.py) in one process and print their ratios.

Each section module defines ``run() -> list[str]`` returning printable result lines; timings are
measured within one run so the printed ratios compare like with like on the same (noisy) machine.
Usage: python scripts/benchmark.py [section ...]   (e.g. `emsqa`, `medicationqa`, `emrqa`, `rag`, `startup`)
       python scripts/benchmark.py --profile [section ...]   the top pack-owned costs instead: cProfile
       restricted to the pack's functions and `-X importtime` per benchmark, from each section's
       ``profile()`` (sections without one are skipped)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(selected: list[str]) -> int:
    if {"-h", "--help"} & set(selected):
        print(__doc__)
        return 0
    profiling = "--profile" in selected
    selected = [name for name in selected if name != "--profile"]
    sections = sorted(HERE.glob("bench_*.py"))
    known = [path.stem[len("bench_") :] for path in sections]
    unknown = [name for name in selected if name not in known]
    if unknown:
        print(f"benchmark.py: no section {', '.join(unknown)}; the sections are {', '.join(known)}", file=sys.stderr)
        return 2
    for path in sections:
        name = path.stem[len("bench_") :]
        if selected and name not in selected:
            continue
        spec = importlib.util.spec_from_file_location(f"bench_{name}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # type: ignore[union-attr]
        if profiling and not hasattr(module, "profile"):
            continue
        print(f"== {name}{' (profile)' if profiling else ''}", flush=True)
        for line in module.profile() if profiling else module.run():
            print(f"   {line}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
