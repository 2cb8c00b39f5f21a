"""``medeval judge OUTPUT_DIR``: judge a finished run's logged samples without regenerating.

Reads the newest ``samples_<task>_*.jsonl`` of each judged task under ``OUTPUT_DIR`` (lm-eval's
``--output_path`` with ``--log_samples``; ``--predict_only`` runs work too), judges each logged
answer with the panel (``--judges FILE``, ``--judge-model`` flags, or ``$MEDEVAL_JUDGES``; cached
verdicts are reused, ``--retry-unscored`` asks failed ones again), and writes next to the run's
results file:

- ``judged_<task>_<time>.jsonl``: per item, doc_id, question type, the verdicts and the item's metrics
- ``<results>_judged.json``: the run's results file with this task's metrics replaced by the
  recomputed ones (each with its stderr) and a ``medeval_judge`` block (panel, settings, rubric),
  unless an existing judged file scored more items (it is then kept, and the new one is not written).

Without a panel it is an error (exit 2). A judge that scored nothing makes the exit code 3 unless
``--allow-unscored``; ``unscored_exit_code`` gives ``medeval run`` the same rule.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from medeval_metrics.data import MedevalDataError


def _judged_spec(task: str) -> dict[str, str] | None:
    """The module with RUBRIC and process_results, and the doc fields the judge reads (the benchmark's spec)."""
    from medeval_metrics import registry

    judging = registry.judging_for(task)
    return (
        None
        if judging is None
        else {
            "module": judging.module,
            "question_field": judging.question_field,
            "reference_field": judging.reference_field,
        }
    )


def _judged_benchmarks() -> tuple[str, ...]:
    from medeval_metrics import registry

    return registry.judged_benchmarks()


def _scored_items(results_file: Path, task: str) -> int:
    """How many items an existing judged results file scored for ``task`` (0 if unreadable)."""
    try:
        block = json.loads(results_file.read_text(encoding="utf-8")).get("medeval_judge", {}).get(task, {})
        return int(block.get("items_scored", 0))
    except (OSError, ValueError, AttributeError, TypeError):
        return 0


def _items_scored_in_samples(samples: list[dict[str, Any]]) -> int:
    """How many of a run's logged samples (one per doc) its own panel scored (their ``judge_verdicts``)."""
    count = 0
    for sample in samples:
        verdicts = sample.get("judge_verdicts")
        if isinstance(verdicts, str):
            try:
                verdicts = json.loads(verdicts)
            except ValueError:
                continue
        if isinstance(verdicts, dict) and any(isinstance(v, dict) and v.get("scores") for v in verdicts.values()):
            count += 1
    return count


def finite_or_na(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by "N/A", as lm-eval's own results file writes a
    statistic without a value: strict JSON readers refuse NaN, and the pack writes only strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return "N/A"
    if isinstance(value, dict):
        return {key: finite_or_na(inner) for key, inner in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_na(inner) for inner in value]
    return value


def _newest_results(folder: Path) -> Path | None:
    files = [p for p in folder.glob("results_*.json") if not p.stem.endswith("_judged")]
    return max(files, key=lambda p: p.stat().st_mtime) if files else None


def judge_output(
    output_dir: Path, panel: Any, progress: bool = True, retry_unscored: bool = False
) -> list[dict[str, Any]]:
    """Judge every judged task found under ``output_dir``; returns what was written, per task."""
    from medeval_metrics.breakdown import find_sample_files, read_samples
    from medeval_metrics.judge.aggregate import summarise
    from medeval_metrics.judge.filter import judge_answers, rubric_for
    from medeval_metrics.judge.runner import panel_summary

    if panel is None:
        raise MedevalDataError(
            "medeval judge: no judge panel: give --judges FILE, --judge-model MODEL, or set MEDEVAL_JUDGES."
        )

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
        records = judge_answers(
            answers,
            docs,
            module.RUBRIC,
            spec["question_field"],
            spec["reference_field"],
            panel=panel,
            progress=progress,
            retry_unscored=retry_unscored,
        )
        per_item = [module.process_results(doc, [record]) for doc, record in zip(docs, records)]
        summary = summarise(per_item)
        judges_summary = panel_summary([r["verdicts"] for r in records], panel.judge_names)
        items_scored = sum(1 for r in records if any(v.get("scores") for v in r["verdicts"].values()))
        rubric = rubric_for(module.RUBRIC, panel)

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
        from medeval_metrics.safe_files import atomic_open, atomic_write_text

        with atomic_open(verdicts_path, private=True) as handle:  # verdicts quote the answers: 0600
            for sample, record, metrics in zip(ordered, records, per_item):
                handle.write(
                    json.dumps(
                        finite_or_na(
                            {
                                "doc_id": sample["doc_id"],
                                "question_type": sample["doc"].get("question_type"),
                                "verdicts": record["verdicts"],
                                "metrics": metrics,
                            }
                        ),
                        ensure_ascii=False,
                        allow_nan=False,
                    )
                    + "\n"
                )

        results_path = _newest_results(folder)
        results: dict[str, Any] = (
            json.loads(results_path.read_text(encoding="utf-8")) if results_path else {"results": {}}
        )
        task_results = results.setdefault("results", {}).setdefault(task, {"alias": task})
        # this panel's judge metrics replace the run's own, all of them: no old judge_success_<name> left beside
        for key in [k for k in task_results if k.startswith("judge_") and k.endswith(f",{filter_name}")]:
            del task_results[key]
        for metric, stats in summary.items():
            task_results[f"{metric},{filter_name}"] = stats["value"]
            task_results[f"{metric}_stderr,{filter_name}"] = stats["stderr"]
        task_results["sample_len"] = len(ordered)
        results.setdefault("medeval_judge", {})[task] = {
            "judged_at": stamp,
            "samples": str(samples_path.name),
            "rubric": rubric.name,
            "rubric_version": rubric.version,
            "rubric_hash": rubric.content_hash(),
            # names of key variables only: header and key values never reach this file
            "judges": [j.describe() for j in panel.judges],
            "settings": {**panel.settings(), "concurrency": panel.concurrency, "retry_unscored": retry_unscored},
            "judge_scores_computed": True,
            "items": len(ordered),
            "items_scored": items_scored,
            "per_judge": judges_summary,
            "breakdown": breakdown,
        }
        out_path = folder / (f"{results_path.stem}_judged.json" if results_path else f"results_{stamp}_judged.json")
        # never replace results that judged more: an earlier `medeval judge`, or the run's own panel
        best_before = max(_scored_items(out_path, task) if out_path.is_file() else 0, _items_scored_in_samples(ordered))
        kept = best_before > items_scored
        if not kept:
            text = json.dumps(finite_or_na(results), indent=2, ensure_ascii=False, default=str, allow_nan=False)
            atomic_write_text(out_path, text, private=True)
        written.append(
            {
                "task": task,
                "filter": filter_name,
                "summary": summary,
                "verdicts": verdicts_path,
                "results": out_path,
                "kept_existing": kept,
                "per_judge": judges_summary,
                "items_scored": items_scored,
                "breakdown": breakdown_markdown(task, breakdown) if breakdown else "",
            }
        )
    return written


def _table(task: str, summary: dict[str, Any]) -> str:
    lines = [f"| {task} | value | stderr | n |", "|---|---:|---:|---:|"]
    for metric, stats in summary.items():
        value, stderr = (f"{x:.4f}" if math.isfinite(x) else "N/A" for x in (stats["value"], stats["stderr"]))
        lines.append(f"| {metric} | {value} | {stderr} | {stats['n']} |")
    return "\n".join(lines)


def add_judge_flags(parser: argparse.ArgumentParser) -> None:
    """The panel flags ``medeval judge`` and ``medeval run`` share (MedARC-style lists, by position)."""
    parser.add_argument("--judges", help="judges file (JSON/YAML) or inline JSON; default: $MEDEVAL_JUDGES")
    parser.add_argument(
        "--judge-model",
        action="append",
        default=[],
        metavar="MODEL",
        help="a judge model; repeat for a panel (a --judges file then only supplies settings)",
    )
    parser.add_argument(
        "--judge-base-url",
        action="append",
        default=[],
        metavar="URL",
        help="the judge's OpenAI-compatible base URL; once for all, or once per --judge-model",
    )
    parser.add_argument(
        "--judge-api-key-env",
        action="append",
        default=[],
        metavar="VAR",
        help="NAME of the variable holding the judge's key; once for all, or once per --judge-model",
    )
    parser.add_argument("--allow-unscored", action="store_true", help="exit 0 even if a judge scored nothing")


def panel_from_args(args: argparse.Namespace) -> Any:
    """The panel the flags of ``add_judge_flags`` describe, or None."""
    from medeval_metrics.judge.config import load_panel, panel_from_flags

    base = load_panel(args.judges) if args.judges else None
    if args.judge_model:
        return panel_from_flags(
            args.judge_model, args.judge_base_url, args.judge_api_key_env, base=base or load_panel()
        )
    if args.judge_base_url or args.judge_api_key_env:
        raise MedevalDataError(
            "--judge-base-url/--judge-api-key-env need --judge-model (one per judge, or one for all)."
        )
    return base if base is not None else load_panel()


def unscored_exit_code(per_judge: dict[str, dict[str, Any]], allow_unscored: bool = False) -> tuple[int, str | None]:
    """(exit code, one-line reason): 3 when any judge scored nothing, unless ``allow_unscored``.
    ``per_judge`` is ``runner.panel_summary`` output (also in ``medeval_judge.<task>.per_judge``)."""
    dead = [
        f"{name} ({s.get('top_reason') or 'no verdicts'})"
        for name, s in per_judge.items()
        if s.get("scored", 0) == 0 and s.get("unscored", 0) > 0
    ]
    if not dead or allow_unscored:
        return 0, None
    return 3, f"judge(s) scored nothing: {', '.join(dead)}. Fix them, or pass --allow-unscored."


def _dead_judges(results: dict[str, Any]) -> list[str]:
    """Each judge that scored no item of a judged task of ``results`` (lm-eval's return value), as "judge (task)".

    Per-judge success is no metric of lm-eval's (its name would depend on the panel): it is read from the task's
    logged samples where the run kept them (``--log_samples``: every rank's items), else from the judge filters
    that ran in this process since the evaluation started (``filter.panel_outcomes_since``; in a data-parallel
    run, rank 0's items)."""
    from medeval_metrics.judge.aggregate import success_by_judge

    judged = [
        task
        for task, metrics in (results.get("results") or {}).items()
        if _judged_spec(task) and any(str(key).startswith("judge_verdicts,") for key in metrics)
    ]
    dead: set[str] = set()
    unlogged = []
    for task in judged:
        samples = (results.get("samples") or {}).get(task)
        if not samples:
            unlogged.append(task)
            continue
        success = success_by_judge([s["judge_verdicts"] for s in samples if s.get("judge_verdicts") is not None])
        dead |= {f"{name} ({task})" for name, stats in success.items() if stats["n"] and not stats["scored"]}
    if unlogged and isinstance(results.get("date"), (int, float)):
        from medeval_metrics.judge.filter import panel_outcomes_since

        scored: dict[str, int] = {}
        for outcome in panel_outcomes_since(float(results["date"])):
            for name, stats in outcome.items():
                scored[name] = scored.get(name, 0) + int(stats.get("scored", 0))
        # the filters do not know their task: a judge that scored nothing is named with each unlogged judged task
        dead |= {f"{name} ({task})" for name, count in scored.items() if count == 0 for task in unlogged}
    return sorted(dead)


def run_unscored_exit_code(
    results: dict[str, Any], allow_unscored: bool = False, run: Any = None
) -> tuple[int, str | None]:
    """For ``medeval run`` after lm-eval returns: (3, reason) when a judge scored no item of a judged task
    (``_dead_judges``), unless ``allow_unscored``; else (0, None). With the run's command line as read
    (``run``, see ``rejudge_hint``) the reason ends with how to re-judge without generating again."""
    dead = _dead_judges(results)
    if not dead or allow_unscored:
        return 0, None
    if run is None:
        return 3, f"judge(s) scored nothing: {', '.join(dead)}. Fix them, or pass --allow-unscored."
    return (
        3,
        f"judge(s) scored nothing: {', '.join(dead)}. Fix them, then {rejudge_hint(run)} (or pass --allow-unscored).",
    )


_PANEL_FLAGS = ("--judges", "--judge-model", "--judge-base-url", "--judge-api-key-env")


def rejudge_hint(run: Any) -> str:
    """How to judge a finished ``medeval run``'s answers again without generating them: ``medeval judge
    OUT`` with the run's own panel flags, or, where the run kept no samples, what to add next time. ``run``: the
    run's command line as read once (``preflight.read_command_line``: its output path, samples, judge flags and
    metadata)."""
    import shlex

    if run.output_path is None or not run.writes_samples:
        return (
            "run again with --output_path DIR --log_samples, so that `medeval judge DIR` can re-judge the "
            "answers without generating them"
        )
    from medeval_metrics.judge.config import url_without_userinfo

    given = {
        "--judges": [run.judges] if run.judges else [],
        "--judge-model": run.judge_model,
        "--judge-base-url": [url_without_userinfo(url) or "" for url in run.judge_base_url],
        "--judge-api-key-env": run.judge_api_key_env,
    }
    # printed: a URL's user:password@ is left out (put back by hand, or better, use a key variable)
    flags = [f"{flag} {shlex.quote(value)}" for flag in _PANEL_FLAGS for value in given[flag]]
    panel = (run.metadata or {}).get("medeval_judges")
    if not flags and panel is not None:  # names of key variables only: a panel holds no key
        flags = [f"--judges {shlex.quote(_shown_panel(panel))}"]
    from medeval_metrics.redact import redact_text

    # a base URL can carry a token in its query: the line is printed, so it is redacted like all output
    return redact_text(
        "re-judge without generating again: " + " ".join(["medeval judge", shlex.quote(run.output_path), *flags])
    )


def _shown_panel(panel: Any) -> str:
    """A panel given inline (``--metadata medeval_judges``) as printed: its judges' URLs without credentials."""
    from medeval_metrics.judge.config import url_without_userinfo

    if isinstance(panel, str):
        try:
            parsed = json.loads(panel)
        except ValueError:
            return panel  # a judges file's path
    else:
        parsed = panel
    judges = parsed.get("judges") if isinstance(parsed, dict) else parsed
    changed = False
    for judge in judges if isinstance(judges, list) else []:
        if isinstance(judge, dict) and isinstance(judge.get("base_url"), str):
            shown = url_without_userinfo(judge["base_url"])
            changed |= shown != judge["base_url"]
            judge["base_url"] = shown
    if isinstance(panel, str) and not changed:
        return panel  # as the user wrote it
    return json.dumps(parsed)


def _cmd(args: argparse.Namespace) -> int:
    import sys
    from dataclasses import replace

    from medeval_metrics.judge.runner import summary_lines

    panel = panel_from_args(args)
    if panel is None:
        print(
            "medeval judge: error: no judge panel: give --judges FILE, --judge-model MODEL, or set MEDEVAL_JUDGES.",
            file=sys.stderr,
        )
        return 2
    if args.concurrency:
        panel = replace(panel, concurrency=args.concurrency)
    args.panel_in_use = panel  # for the line Ctrl-C ends the command with (``_interrupted``)
    from medeval_metrics.judge.config import validate_panel

    validate_panel(panel, where="medeval judge")
    if not args.skip_judge_check:
        from medeval_metrics.judge.health import panel_problems

        problems = panel_problems(panel)
        for problem in problems:
            print(f"medeval judge: error: {problem}", file=sys.stderr)
        if problems:
            return 2
    code = 0
    for entry in judge_output(
        Path(args.output_dir), panel, progress=not args.quiet, retry_unscored=args.retry_unscored
    ):
        print(_table(entry["task"], entry["summary"]))
        if entry["breakdown"] and args.breakdown:
            print("\n" + entry["breakdown"])
        print()
        for line in summary_lines(entry["per_judge"]):
            print(line)
        if entry["kept_existing"]:
            print(
                f"\nkept the results on file: they scored more items than this run ({entry['items_scored']}); "
                f"verdicts of this run: {entry['verdicts']}"
            )
        else:
            print(f"\nwritten: {entry['verdicts']} and {entry['results']}")
        task_code, reason = unscored_exit_code(entry["per_judge"], args.allow_unscored)
        if reason:
            print(f"medeval judge: {reason}", file=sys.stderr)
        code = max(code, task_code)
    return _cache_failure_exit_code(code, "medeval judge")


def _interrupted(args: argparse.Namespace) -> str:
    """Ctrl-C in ``medeval judge``: what the judge cache kept (every verdict received is stored as judging stops)
    and how to go on; no judged file is written until every task is judged."""
    panel = getattr(args, "panel_in_use", None)
    if panel is None:
        return "nothing was asked or written. Run the same command again."
    if panel.cache:
        return (
            f"the verdicts received so far are kept in the judge cache {Path(panel.cache).expanduser()}; a task's "
            "judged files are written only when it is judged whole. Run the same command again: only the verdicts "
            "the cache lacks are asked for."
        )
    return (
        'the panel has no "cache", so the verdicts received were not kept. Give the panel a "cache" path so that '
        "a run interrupted again resumes where it stopped."
    )


def _cache_failure_exit_code(code: int, prog: str) -> int:
    """``code``, or ``CACHE_FAILED_EXIT`` (4) when all else went well but a judge cache was not fully
    updated in this process (the results hold every verdict; a later run asks for those again)."""
    import sys

    from medeval_metrics.judge import runner

    failures, runner.cache_failures[:] = list(runner.cache_failures), []
    if failures and code == 0:
        print(
            f"{prog}: warning: the judge cache was not fully updated ({'; '.join(failures)}); the results are "
            "written and hold every verdict.",
            file=sys.stderr,
        )
        return runner.CACHE_FAILED_EXIT
    return code


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("judge", help="judge a finished run's logged samples (--log_samples) with a judge panel")
    p.add_argument("output_dir", help="the folder given to lm-eval's --output_path")
    add_judge_flags(p)
    p.add_argument("--retry-unscored", action="store_true", help="ask again every verdict cached as unscored")
    p.add_argument("--concurrency", type=int, help="override the panel's concurrency")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--breakdown", action="store_true", help="also print the per-category breakdown tables")
    p.add_argument(
        "--skip-judge-check", action="store_true", help="do not send each judge one test request before judging"
    )
    p.set_defaults(func=_cmd, interrupted=_interrupted)
