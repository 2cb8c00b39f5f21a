"""Per-category breakdowns computed from one run's logged samples (never by re-running the model).

lm-eval's ``--log_samples`` writes each doc with its per-item metric values; a breakdown groups
those values by fields of the doc (an item listed under several categories counts in each) and
reports mean, stderr and count per category, as JSON and as a Markdown table. A category with one
item has no stderr: ``null`` in JSON, ``N/A`` in tables, no interval in figures.
Each benchmark declares its breakdown dimensions in its spec (``BenchmarkSpec.breakdowns``,
task-name prefix -> ``BreakdownSpec``); ``task_breakdown`` is what every caller uses.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from medeval_metrics import registry
from medeval_metrics.errors import MedevalDataError
from medeval_metrics.spec import BreakdownSpec, Categories, crossed, doc_field
from medeval_metrics.stats import mean_and_stderr

__all__ = [
    "BreakdownSpec",
    "Categories",
    "breakdown_markdown",
    "breakdowns_for_output",
    "compute_breakdown",
    "crossed",
    "doc_field",  # defined in medeval_metrics.spec, where specs use them
    "find_sample_files",
    "read_samples",
    "register_cli",
    "spec_for_task",
    "task_breakdown",
    "write_breakdowns",
]


def spec_for_task(task: str) -> BreakdownSpec | None:
    """The task's breakdown, as its benchmark's spec declares it (None: the task has none)."""
    return registry.breakdown_for(task)


def task_breakdown(task: str, samples: Iterable[dict[str, Any]]) -> dict[str, Any] | None:
    """The one way a breakdown is made: the task's spec applied to its logged samples (None: no breakdown)."""
    spec = spec_for_task(task)
    if spec is None:
        return None
    breakdown = compute_breakdown(samples, spec)
    # a task read two ways (several filters, as lm-eval's gsm8k): its headline reading first, as the report
    reporting = getattr(registry.benchmark_of(task), "reporting", None)
    order = reporting.ordered_filters(breakdown) if reporting is not None else list(breakdown)
    return {name: breakdown[name] for name in order}


def compute_breakdown(samples: Iterable[dict[str, Any]], spec: BreakdownSpec) -> dict[str, Any]:
    """``{filter: {dimension: {category: {metric: {value, stderr, n}}}}}`` from logged samples."""
    grouped: dict[str, dict[str, dict[str, dict[str, list[float]]]]] = {}
    for number, sample in enumerate(samples, 1):
        doc = sample.get("doc", {})
        filter_name = sample.get("filter", "none")
        for dimension, categories in spec.dimensions.items():
            try:
                found = categories(doc)
            except (AttributeError, TypeError, ValueError, KeyError) as exc:  # a doc edited by hand, or another tool's
                raise MedevalDataError(
                    f"record {number} (doc_id {str(sample.get('doc_id'))[:40]!r}): its doc's {dimension} cannot be "
                    f"read ({type(exc).__name__}): the doc is not as the task logged it. Run the evaluation again."
                ) from None
            for category in found:
                bucket = grouped.setdefault(filter_name, {}).setdefault(dimension, {}).setdefault(category, {})
                for metric in spec.metrics:
                    if isinstance(sample.get(metric), (int, float)):
                        bucket.setdefault(metric, []).append(float(sample[metric]))
    out: dict[str, Any] = {}
    for filter_name, dims in grouped.items():
        for dimension, cats in dims.items():
            for category in sorted(cats):
                for metric, values in cats[category].items():
                    value, stderr = mean_and_stderr(values)
                    out.setdefault(filter_name, {}).setdefault(dimension, {}).setdefault(category, {})[metric] = {
                        "value": value,
                        # one item has no spread to measure: N/A (null), as lm-eval prints it, not a false 0
                        "stderr": stderr if len(values) >= 2 else None,
                        "n": len(values),
                    }
    return out


def _cell(value: dict[str, Any]) -> str:
    stderr = value.get("stderr")
    return f"{value['value']:.4f} ± " + ("N/A" if stderr is None else f"{stderr:.4f}")


def breakdown_markdown(task: str, breakdown: dict[str, Any]) -> str:
    parts = []
    for filter_name, dims in breakdown.items():
        for dimension, cats in dims.items():
            metrics = sorted({m for cat in cats.values() for m in cat})
            header = f"| {dimension} | n | " + " | ".join(metrics) + " |"
            lines = [
                f"**{task}** by {dimension} (filter `{filter_name}`)",
                "",
                header,
                "|" + "---|" * (len(metrics) + 2),
            ]
            for category, values in cats.items():
                n = max(v["n"] for v in values.values())
                cells = [_cell(values[m]) if m in values else "" for m in metrics]
                # Categories can hold "|" (e.g. templates' |slot| placeholders): escape it for Markdown.
                cell = category.replace("|", "\\|")
                lines.append(f"| {cell} | {n} | " + " | ".join(cells) + " |")
            parts.append("\n".join(lines))
    return "\n\n".join(parts)


def find_sample_files(output_dir: Path, since: float | None = None) -> dict[str, Path]:
    """Newest ``samples_<task>_<date>.jsonl`` per task under an lm-eval output folder
    (only files written after ``since``, a timestamp, when given)."""
    newest: dict[str, Path] = {}
    for path in sorted(Path(output_dir).rglob("samples_*.jsonl")):
        if since is not None and path.stat().st_mtime < since:
            continue
        task = path.name[len("samples_") :].rsplit("_", 1)[0]
        if task not in newest or path.stat().st_mtime >= newest[task].stat().st_mtime:
            newest[task] = path
    return newest


# A JSON escape of a UTF-16 surrogate: a pair (an emoji written as ASCII) or a lone one, which no UTF-8 file can
# hold (a model's output cut inside a character): only lines holding one are walked for lone ones.
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def without_lone_surrogates(value: Any) -> Any:
    """Parsed JSON with every lone surrogate replaced by U+FFFD, so that the text can be written as UTF-8 and
    drawn (a lone surrogate fails both). Recursive: call it on records that parsed (their depth is bounded)."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    if isinstance(value, dict):
        return {without_lone_surrogates(key): without_lone_surrogates(item) for key, item in value.items()}
    return value


def json_kind(value: Any) -> str:
    """What a parsed JSON value is, in words (for errors)."""
    if isinstance(value, bool):
        return f"true/false ({str(value).lower()})"
    if value is None:
        return "null"
    return {dict: "an object", list: "a list", str: "text", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


def shown(value: Any, limit: int = 60) -> str:
    """A value from a file as an error quotes it: short, with control characters escaped."""
    text = str(value)
    short = text if len(text) <= limit else text[: limit - 3] + "..."
    return short if short.isprintable() else ascii(short)


def utf8_text(path: Path, what: str, fix: str) -> str:
    """The file's text; a byte that is not UTF-8 is one line naming the file, its line and the fix."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise MedevalDataError(
            f"{path}: line {line} is not UTF-8 text (byte {exc.start}: 0x{data[exc.start]:02x}); {what}. {fix}"
        ) from None


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The records of a sample log (lm-eval's ``samples_<task>_<date>.jsonl``, or ``medeval judge``'s records).
    Anything but one JSON object per line is one line naming the file, the line and the fix."""
    fix = "Run the evaluation again."
    text = utf8_text(path, "the sample log is damaged or was not written by lm-eval", fix)
    samples = []
    # split at "\n" only: lm-eval writes text unescaped (ensure_ascii=False), and an output may hold U+2028 or
    # U+0085, which str.splitlines would also split at, cutting a record in two
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError) as exc:  # a log cut short (a full disk under an older version)
            raise MedevalDataError(
                f"{path}: line {number} is not a JSON record ({type(exc).__name__}); the sample "
                f"log is damaged or cut short. {fix}"
            ) from None
        if not isinstance(record, dict):
            raise MedevalDataError(
                f"{path}: line {number} is JSON but not a record: {json_kind(record)}, where lm-eval writes one "
                f"object per line; the sample log was edited or not written by lm-eval. {fix}"
            )
        if "\\u" in line and _ESCAPED_SURROGATE.search(line):
            record = without_lone_surrogates(record)
        samples.append(record)
    return samples


def breakdowns_for_output(output_dir: Path, since: float | None = None) -> tuple[dict[str, dict[str, Any]], list[Path]]:
    """Breakdowns of every medeval task with logged samples, and the sample files they came from."""
    result, used = {}, []
    for task, path in find_sample_files(output_dir, since).items():
        if spec_for_task(task) is not None:
            result[task] = task_breakdown(task, read_samples(path))
            used.append(path)
    return result, used


def write_breakdowns(
    output_dir: Path, destination: Path | None = None, since: float | None = None
) -> tuple[Path, Path, str] | None:
    """Write ``medeval_breakdowns.{json,md}`` (by default beside the newest samples file, i.e. next
    to the run's results JSON); returns their paths and the Markdown text."""
    all_breakdowns, used = breakdowns_for_output(output_dir, since)
    if not all_breakdowns:
        return None
    destination = Path(destination) if destination else max(used, key=lambda p: p.stat().st_mtime).parent
    destination.mkdir(parents=True, exist_ok=True)
    json_path = destination / "medeval_breakdowns.json"
    md_path = destination / "medeval_breakdowns.md"
    from medeval_metrics.safe_files import atomic_write_text

    atomic_write_text(json_path, json.dumps(all_breakdowns, indent=2, sort_keys=True))
    text = "\n\n".join(breakdown_markdown(task, b) for task, b in sorted(all_breakdowns.items()))
    atomic_write_text(md_path, text + "\n")
    return json_path, md_path, text


def _cmd(args: argparse.Namespace) -> int:
    written = write_breakdowns(Path(args.output_dir), Path(args.destination) if args.destination else None)
    if written is None:
        raise MedevalDataError(
            f"{args.output_dir}: no logged samples of a medeval task found. Run lm-eval with "
            "`--output_path DIR --log_samples` and pass that DIR."
        )
    json_path, md_path, text = written
    print(text)
    print(f"\nwritten: {json_path} and {md_path}")
    return 0


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("breakdown", help="per-category scores from a run's logged samples (--log_samples)")
    p.add_argument("output_dir", help="the folder given to lm-eval's --output_path")
    p.add_argument("--destination", help="where to write medeval_breakdowns.{json,md} (default: output_dir)")
    p.set_defaults(func=_cmd)
