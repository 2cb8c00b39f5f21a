"""``medeval judge OUTPUT_DIR``: judge a finished run's logged samples without regenerating.

Reads the newest ``samples_<task>_*.jsonl`` of each judged task under ``OUTPUT_DIR`` (lm-eval's
``--output_path`` with ``--log_samples``; ``--predict_only`` runs work too), judges each logged
answer with the panel (from ``--judges`` or ``$MEDEVAL_JUDGES``; cached verdicts are reused), and
writes next to the run's results file:

- ``judged_<task>_<time>.jsonl``: per item, doc_id, question type, the verdicts and the item's metrics
- ``<results>_judged.json``: the run's results file with this task's metrics replaced by the
  recomputed ones (each with its stderr) and a ``medeval_judge`` block (panel, rubric version)
"""

from __future__ import annotations

import argparse
import importlib
import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError


def _judged_spec(task: str) -> dict[str, str] | None:
    """The module with RUBRIC and process_results, and the doc fields the judge reads (the benchmark's spec)."""
    from medeval_metrics import registry

    judging = registry.judging_for(task)
    return None if judging is None else {"module": judging.module, "question_field": judging.question_field,
                                         "reference_field": judging.reference_field}


def _judged_benchmarks() -> tuple[str, ...]:
    from medeval_metrics import registry

    return registry.judged_benchmarks()


def _newest_results(folder: Path) -> Path | None:
    files = [p for p in folder.glob("results_*.json") if not p.stem.endswith("_judged")]
    return max(files, key=lambda p: p.stat().st_mtime) if files else None


def judge_output(output_dir: Path, panel: Any, progress: bool = True) -> list[dict[str, Any]]:
    """Judge every judged task found under ``output_dir``; returns what was written, per task."""
    from medeval_metrics.breakdown import find_sample_files, read_samples
    from medeval_metrics.judge.aggregate import summarize
    from medeval_metrics.judge.filter import judge_answers

    written = []
    found = {t: p for t, p in find_sample_files(output_dir).items() if _judged_spec(t)}
    if not found:
        raise MedevalDataError(
            f"{output_dir}: no logged samples of a judged task ({', '.join(_judged_benchmarks())}) found. Run lm-eval with "
            "`--output_path DIR --log_samples` and pass that DIR."
        )
    for task, samples_path in sorted(found.items()):
        spec = _judged_spec(task)
        module = importlib.import_module(spec["module"])
        samples = read_samples(samples_path)
        by_doc: dict[int, dict[str, Any]] = {}
        for number, sample in enumerate(samples, start=1):
            try:
                by_doc.setdefault(int(sample["doc_id"]), sample)
                _ = sample["resps"][0][0], sample["doc"]
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise MedevalDataError(
                    f"{samples_path}: line {number} is not an lm-eval sample record (needs doc_id, doc, resps). "
                    "Pass the folder written by lm-eval's --log_samples."
                ) from exc
        ordered = [by_doc[k] for k in sorted(by_doc)]
        filter_name = ordered[0].get("filter", "none")
        docs = [s["doc"] for s in ordered]
        answers = [str(s["resps"][0][0]) for s in ordered]
        records = judge_answers(answers, docs, module.RUBRIC, spec["question_field"], spec["reference_field"],
                                panel=panel, progress=progress)
        per_item = [module.process_results(doc, [record]) for doc, record in zip(docs, records)]
        summary = summarize(per_item)

        from medeval_metrics.breakdown import breakdown_markdown, compute_breakdown, spec_for_task

        breakdown_spec = spec_for_task(task)
        breakdown = (
            compute_breakdown(
                [{"doc": doc, "filter": filter_name, **metrics} for doc, metrics in zip(docs, per_item)], breakdown_spec
            )
            if breakdown_spec
            else {}
        )

        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H-%M-%S.%f")
        folder = samples_path.parent
        verdicts_path = folder / f"judged_{task}_{stamp}.jsonl"
        with verdicts_path.open("w", encoding="utf-8") as handle:
            for sample, record, metrics in zip(ordered, records, per_item):
                handle.write(json.dumps({
                    "doc_id": sample["doc_id"],
                    "question_type": sample["doc"].get("question_type"),
                    "verdicts": record["verdicts"],
                    "metrics": metrics,
                }, ensure_ascii=False) + "\n")

        results_path = _newest_results(folder)
        results: dict[str, Any] = json.loads(results_path.read_text(encoding="utf-8")) if results_path else {"results": {}}
        task_results = results.setdefault("results", {}).setdefault(task, {"alias": task})
        for metric, stats in summary.items():
            task_results[f"{metric},{filter_name}"] = stats["value"]
            task_results[f"{metric}_stderr,{filter_name}"] = stats["stderr"]
        task_results["sample_len"] = len(ordered)
        results.setdefault("medeval_judge", {})[task] = {
            "judged_at": stamp,
            "samples": str(samples_path.name),
            "rubric": module.RUBRIC.name,
            "rubric_version": module.RUBRIC.version,
            "judges": [] if panel is None else [{"name": j.name, **j.identity(), "api_key_env": j.api_key_env} for j in panel.judges],
            "judge_scores_computed": panel is not None,
            "breakdown": breakdown,
        }
        out_path = folder / (f"{results_path.stem}_judged.json" if results_path else f"results_{stamp}_judged.json")
        out_path.write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str), encoding="utf-8")
        written.append({"task": task, "filter": filter_name, "summary": summary, "verdicts": verdicts_path,
                        "results": out_path, "breakdown": breakdown_markdown(task, breakdown) if breakdown else ""})
    return written


def _table(task: str, summary: dict[str, Any]) -> str:
    lines = [f"| {task} | value | stderr | n |", "|---|---:|---:|---:|"]
    for metric, stats in summary.items():
        lines.append(f"| {metric} | {stats['value']:.4f} | {stats['stderr']:.4f} | {stats['n']} |")
    return "\n".join(lines)


def _cmd(args: argparse.Namespace) -> int:
    from medeval_metrics.judge.config import load_panel
    from medeval_metrics.judge.filter import NO_JUDGE_MESSAGE

    panel = load_panel(args.judges)
    if panel is not None and args.concurrency:
        from dataclasses import replace

        panel = replace(panel, concurrency=args.concurrency)
    for entry in judge_output(Path(args.output_dir), panel, progress=not args.quiet):
        print(_table(entry["task"], entry["summary"]))
        if entry["breakdown"] and args.breakdown:
            print("\n" + entry["breakdown"])
        if panel is None:
            print(f"\nmedeval judge: {NO_JUDGE_MESSAGE}")
        print(f"\nwritten: {entry['verdicts']} and {entry['results']}")
    return 0


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("judge", help="judge a finished run's logged samples (--log_samples) with a judge panel")
    p.add_argument("output_dir", help="the folder given to lm-eval's --output_path")
    p.add_argument("--judges", help="judges file (JSON/YAML) or inline JSON; default: $MEDEVAL_JUDGES")
    p.add_argument("--concurrency", type=int, help="override the panel's concurrency")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--breakdown", action="store_true", help="also print the per-category breakdown tables")
    p.set_defaults(func=_cmd)
