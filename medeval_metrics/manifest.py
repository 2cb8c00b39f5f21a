"""The pack's manifest: tasks, versions, sample counts, data sources and pins, licences.

One file (``manifest.json``) feeds ``medeval list``, the README's task table and the tests that
check it against the task YAMLs.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def load_manifest() -> dict[str, Any]:
    return json.loads(resources.files("medeval_metrics").joinpath("manifest.json").read_text(encoding="utf-8"))


def _source_text(manifest: dict[str, Any], task: dict[str, Any]) -> str:
    source = manifest["benchmarks"][task["benchmark"]]["sources"][task["source"]]
    where = f"Hub `{source['hub']}`" if source.get("hub") else "user's file"
    return f"{where}, or local file via `{task['source']}`"


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
