"""The pack's manifest: tasks, versions, sample counts, data sources and pins, licences.

``manifest.json`` is generated from the benchmark specs (``medeval_metrics.registry``) and the task
YAMLs, and shipped in the wheel for tools that read the pack without importing it. No code of the
pack reads it (tests/core/test_no_generated_file_read.py): a stale copy changes nothing at run time. After changing a spec: ``python -m medeval_metrics.manifest --write`` (a test fails while
the file is stale). ``tasks_table`` renders a manifest for ``medeval list`` and the README.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from medeval_metrics import registry
from medeval_metrics.spec import BenchmarkSpec, Source

PACK = "medeval-metrics"
MANIFEST_FILE = Path(__file__).resolve().parent / "manifest.json"


def _source_entry(source: Source) -> dict[str, Any]:
    entry: dict[str, Any] = {"hub": source.hub}
    if source.hub_split:
        entry["hub_split"] = source.hub_split
    entry["files"] = list(source.files)
    entry["upstream"] = source.upstream
    if source.sha256:
        entry["sha256"] = dict(source.sha256)
    return entry


def build_manifest(benchmarks: Iterable[BenchmarkSpec] | None = None) -> dict[str, Any]:
    """The manifest of the given benchmarks (default: the registry's)."""
    if benchmarks is None:
        benchmarks = registry.benchmarks()
    benchmarks = list(benchmarks)
    return {
        "pack": PACK,
        "benchmarks": {
            spec.name: {
                "paper": spec.paper,
                "licence": spec.licence,
                "citation_key": spec.citation_key,
                "sources": {source.key: _source_entry(source) for source in spec.sources},
            }
            for spec in benchmarks
        },
        "tasks": [
            {
                "task": t.name,
                "benchmark": spec.name,
                "version": t.version,
                "output_type": t.output_type,
                "split": t.split,
                "samples": t.samples,
                "source": t.source,
                "metrics": list(t.metrics),
                **({"also_reads": list(t.also_reads)} if t.also_reads else {}),
            }
            for spec in benchmarks
            for t in spec.tasks
        ],
        "groups": [
            {"group": group, "tasks": list(tasks)} for spec in benchmarks for group, tasks in spec.groups.items()
        ],
    }


def manifest_text(manifest: dict[str, Any]) -> str:
    """The file's layout: one line per task and group, so a diff shows what changed."""
    lines = [
        "{",
        f'  "pack": {json.dumps(manifest["pack"])},',
        '  "benchmarks": '
        + json.dumps(manifest["benchmarks"], indent=2, ensure_ascii=False).replace("\n", "\n  ")
        + ",",
    ]
    for key in ("tasks", "groups"):
        rows = [json.dumps(row, ensure_ascii=False) for row in manifest[key]]
        lines.append(
            f'  "{key}": ['
            + ("\n    " + ",\n    ".join(rows) + "\n  " if rows else "")
            + "]"
            + ("," if key == "tasks" else "")
        )
    return "\n".join(lines) + "\n}\n"


def _source_text(manifest: dict[str, Any], task: dict[str, Any]) -> str:
    parts = []
    for key in [task["source"], *task.get("also_reads", [])]:
        source = manifest["benchmarks"][task["benchmark"]]["sources"][key]
        where = f"Hub `{source['hub']}`" if source.get("hub") else "user's file"
        parts.append(f"{where}, or local file via `{key}`")
    return "; plus ".join(parts)


def tasks_table(manifest: dict[str, Any], markdown: bool = False) -> str:
    rows = [
        (
            t["task"],
            t["output_type"],
            t["split"],
            "user's file" if t["samples"] is None else f"{t['samples']:,}",
            ", ".join(t["metrics"]),
            _source_text(manifest, t),
        )
        for t in manifest["tasks"]
    ]
    header = ("task", "type", "split", "samples", "metrics", "data source")
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(f"`{r[0]}`" if i == 0 else r[i] for i in range(len(r))) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate or check manifest.json from the benchmark specs.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 if manifest.json differs from the specs")
    mode.add_argument("--write", action="store_true", help="rewrite manifest.json from the specs")
    parser.add_argument("--path", type=Path, default=MANIFEST_FILE)
    args = parser.parse_args(argv)
    text = manifest_text(build_manifest())
    if args.write:
        from medeval_metrics.safe_files import atomic_write_text

        atomic_write_text(args.path, text)
        return 0
    if args.path.read_text(encoding="utf-8") != text:
        print(f"{args.path} is stale. Run: python -m medeval_metrics.manifest --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
