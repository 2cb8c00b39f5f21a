"""``medeval report``: from lm-eval output folders to a model card section, tables and figures.

Given one or more folders written by lm-eval (``--output_path``; samples where ``--log_samples``
was on), ``build_report`` writes into the output folder:

- ``model_index.yaml``: the card's ``model-index`` metadata (one file per model when the runs hold
  several models: ``model_index_<model>.yaml``);
- ``results.md``: scores with stderr and sample counts, and the settings that change scores;
  ``card_section.md``: the same, ready to paste into a model card;
- ``breakdowns.{json,md}``: per-category scores from logged samples (``medeval_metrics.breakdown``);
  ``judges.{json,md}``: judge scores per judge and dimension, where samples carry them;
- ``figures/*.png``: per-category scores with 95% CIs, judge score distributions;
- with several runs, ``comparison.{md,png}``;
- ``report.json``: what was written, and every score row.

``--update-card README.md`` merges the model-index entries and the results section into an
existing card in place (see ``medeval_metrics.report.model_card``).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

__all__ = ["build_report", "register_cli"]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


def _breakdowns(run) -> dict[str, Any]:
    from medeval_metrics.breakdown import compute_breakdown, spec_for_task

    out = {}
    for task in sorted(run.sample_paths):
        spec = spec_for_task(task)
        rejudged = (run.results.get("medeval_judge", {}).get(task) or {}).get("breakdown")
        if rejudged:  # `medeval judge` re-scored the samples: its breakdown has the new judge metrics
            out[task] = rejudged
        elif spec is not None:
            out[task] = compute_breakdown(run.samples(task), spec)
    return out


MAX_FIGURE_CATEGORIES = 40  # beyond this a bar chart is unreadable: the largest categories are shown


def _figure_categories(values: dict[str, dict[str, float]]) -> tuple[dict[str, dict[str, float]], str]:
    """The categories to plot (all, or the MAX_FIGURE_CATEGORIES with most items) and a title note."""
    if len(values) <= MAX_FIGURE_CATEGORIES:
        return values, ""
    largest = sorted(values, key=lambda c: (-values[c]["n"], c))[:MAX_FIGURE_CATEGORIES]
    return {c: values[c] for c in sorted(largest)}, f" ({MAX_FIGURE_CATEGORIES} largest of {len(values)})"


def _figure_dimensions(breakdown: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(filter, dimension, categories) worth one figure each."""
    return [(f, d, cats) for f, dims in breakdown.items() for d, cats in dims.items() if cats]


def build_report(
    folders: list[Path],
    output: Path,
    figures: bool = True,
    update_card: Path | None = None,
    model: str | None = None,
    source_name: str | None = None,
    source_url: str | None = None,
    include_partial_runs: bool = False,
    model_name: str | None = None,
) -> dict[str, Any]:
    """Write the report files (see the module docstring); returns the contents of ``report.json``."""
    from medeval_metrics import __version__
    from medeval_metrics.breakdown import breakdown_markdown
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.report import judges as judge_mod
    from medeval_metrics.report import model_card, tables
    from medeval_metrics.report.metric_info import metric_info
    from medeval_metrics.report.runs import card_model_name, load_runs

    if figures:  # fail before writing anything when the figures cannot be drawn
        from medeval_metrics.report.figures import _pyplot

        _pyplot()
    load_notes: list[str] = []
    runs = load_runs([Path(f) for f in folders], load_notes)
    if not any(tables.score_rows(run) for run in runs):
        raise MedevalDataError(
            f"{', '.join(str(f) for f in folders)}: no medeval task in these results. "
            "Pass the output folder of a run of the pack's tasks (`medeval list` shows them)."
        )
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    source = {"source_name": source_name or model_card.DEFAULT_SOURCE_NAME,
              "source_url": source_url or model_card.DEFAULT_SOURCE_URL}
    written: list[str] = []

    def write(name: str, text: str) -> None:
        (output / name).parent.mkdir(parents=True, exist_ok=True)
        (output / name).write_text(text, encoding="utf-8")
        written.append(name)

    # model-index, per model; runs with --limit stay out of card metadata unless asked for
    models: dict[str, list] = {}
    for run in runs:
        models.setdefault(run.model_name, []).append(run)
    publishable = {m: [r for r in rs if include_partial_runs or not r.partial] for m, rs in models.items()}
    card_model = _card_model(models, model)
    # the name on the card: the repo id or folder name, never a local path; --model-name overrides
    names = {m: (model_name if model_name and m == card_model else card_model_name(m)) for m in models}
    index_files, notes = {}, load_notes
    for raw_name, model_runs in publishable.items():
        if not model_runs:
            notes.append(f"{names[raw_name]}: no model-index written: every run used --limit (partial test sets); "
                         "pass --include-partial-runs to publish them anyway")
            continue
        name = "model_index.yaml" if len(models) == 1 else f"model_index_{_slug(names[raw_name])}.yaml"
        write(name, model_card.model_index_yaml(names[raw_name], model_card.runs_eval_results(model_runs, **source)))
        index_files[names[raw_name]] = name

    # results tables
    sections = {run.label: tables.run_section(run, __version__) for run in runs}
    intro = ("Scores from lm-evaluation-harness with the medeval-metrics task pack. "
             "± is the standard error of the mean; sample counts are items scored.")
    results_md = ["# medeval results", "", intro, ""]
    for text in sections.values():
        results_md += [text, ""]

    # breakdowns and judges
    all_breakdowns, judge_summaries, judge_collected = {}, {}, {}
    for run in runs:
        breakdown = _breakdowns(run)
        if breakdown:
            all_breakdowns[run.label] = breakdown
        for task in sorted(set(run.sample_paths) | set(run.results.get("medeval_judge", {}))):
            collected = judge_mod.collect_judge_scores(run.judge_records(task) or run.samples(task))
            if collected:
                judge_collected.setdefault(run.label, {})[task] = collected
                judge_summaries.setdefault(run.label, {})[task] = judge_mod.summarise(collected)
    if all_breakdowns:
        write("breakdowns.json", json.dumps(all_breakdowns, indent=2, sort_keys=True) + "\n")
        md = []
        for label, per_task in all_breakdowns.items():
            md += [f"## {label}", ""]
            md += [breakdown_markdown(task, b) + "\n" for task, b in sorted(per_task.items())]
        write("breakdowns.md", "\n".join(md))
        results_md += ["Per-category breakdowns: [breakdowns.md](breakdowns.md).", ""]
    if judge_summaries:
        write("judges.json", json.dumps(judge_summaries, indent=2, sort_keys=True) + "\n")
        md = []
        for label, per_task in judge_summaries.items():
            md += [f"## {label}", ""] + [tables.judge_table(t, s) + "\n" for t, s in sorted(per_task.items())]
        write("judges.md", "\n".join(md))

    # comparison
    if len(runs) > 1:
        comparison = tables.comparison_table(runs)
        write("comparison.md", "# medeval comparison\n\n" + comparison + "\n")
        results_md += ["## Comparison", "", comparison, ""]
    write("results.md", "\n".join(results_md).rstrip() + "\n")

    # figures
    figure_files: list[str] = []
    if figures:
        from medeval_metrics.report import figures as fig

        for run in runs:
            folder = Path("figures") / _slug(run.label)
            for task, breakdown in all_breakdowns.get(run.label, {}).items():
                benchmark = tables.pack_tasks()[task]["benchmark"]
                primary = tables.primary_metric(benchmark, tables.pack_tasks()[task]["metrics"])
                info = metric_info(benchmark, primary)
                for filter_name, dimension, cats in _figure_dimensions(breakdown):
                    values, note = _figure_categories({c: m[primary] for c, m in cats.items() if primary in m})
                    if not values:
                        continue
                    suffix = "" if filter_name in ("none", *_only_filter(breakdown)) else f"__{_slug(filter_name)}"
                    name = folder / f"{task}__{_slug(dimension)}{suffix}.png"
                    fig.category_scores_figure(output / name, f"{run.label}: {task} by {dimension}{note}", info.label,
                                               values, info.scale)
                    figure_files.append(name.as_posix())
            for task, collected in judge_collected.get(run.label, {}).items():
                name = folder / f"{task}__judge_scores.png"
                fig.judge_distribution_figure(output / name, f"{run.label}: {task}", collected)
                figure_files.append(name.as_posix())
        if len(runs) > 1:
            figure_files += _comparison_figures(runs, output, fig, tables)
        written += figure_files

    # card section and update
    card_section = "\n".join(
        ["## Medical QA evaluation (medeval)", "", intro, ""]
        + [sections[run.label].replace("### ", "#### ", 1) + "\n" for run in (publishable[card_model] or models[card_model])]
    ).rstrip() + "\n"
    write("card_section.md", card_section)
    card_changed = None
    if update_card is not None:
        if not publishable[card_model]:
            raise MedevalDataError(
                f"{card_model}: every run used --limit, so its scores cover part of the test sets; the card was "
                "not changed. Run on the full sets, or pass --include-partial-runs to publish partial scores."
            )
        card_changed = model_card.update_card(
            Path(update_card), names[card_model], model_card.runs_eval_results(publishable[card_model], **source), card_section
        )

    report = {
        "medeval_metrics_version": __version__,
        "runs": [{"label": run.label, "model": card_model_name(run.model_name), "results_file": str(run.results_path),
                  "samples_files": {t: str(p) for t, p in run.sample_paths.items()},
                  "scores": [row.__dict__ for row in tables.score_rows(run)]} for run in runs],
        "model_index_files": index_files,
        "figures": figure_files,
        "written": sorted(written),
        "card_updated": card_changed,
        "notes": notes,
    }
    (output / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return report


def _only_filter(breakdown: dict[str, Any]) -> tuple[str, ...]:
    return tuple(breakdown) if len(breakdown) == 1 else ()


def _card_model(models: dict[str, list], chosen: str | None) -> str:
    from medeval_metrics.data import MedevalDataError

    if chosen is not None:
        from medeval_metrics.report.runs import card_model_name

        by_card_name = {card_model_name(m): m for m in models}
        chosen = chosen if chosen in models else by_card_name.get(chosen, chosen)
        if chosen not in models:
            raise MedevalDataError(f"--model {chosen!r} is not among the runs' models: {sorted(models)}.")
        return chosen
    # the newest run's model, when several are given
    return list(models)[-1]


def _comparison_figures(runs, output: Path, fig, tables) -> list[str]:
    """One comparison figure per benchmark: its primary metric per task, one bar per run."""
    from medeval_metrics.report.metric_info import metric_info, reporting_for

    # one figure per (benchmark, primary metric): tasks whose headline metric differs get their own
    per_figure: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    for run in runs:
        for row in tables.score_rows(run):
            task = tables.pack_tasks()[row.task]
            if row.metric != tables.primary_metric(row.benchmark, task["metrics"]):
                continue
            per_figure.setdefault((row.benchmark, row.metric), {}).setdefault(row.task, {})[run.label] = {
                "value": row.value, "stderr": row.stderr, "n": row.samples,
            }
    names = []
    for (benchmark, metric), series in sorted(per_figure.items()):
        info = metric_info(benchmark, metric)
        primary = tables.primary_metric(benchmark, [])
        name = f"comparison__{_slug(benchmark)}.png" if metric == primary else f"comparison__{_slug(benchmark)}__{_slug(metric)}.png"
        display = reporting_for(benchmark).display_name or benchmark
        fig.comparison_figure(output / name, f"{display}: comparison of runs", info.label, series, info.scale)
        names.append(name)
    return names


def _cmd(args: argparse.Namespace) -> int:
    from medeval_metrics.report.figures import MissingReportExtra

    try:
        report = _build_from_args(args)
    except MissingReportExtra as exc:
        print(f"medeval: error: {exc}", file=sys.stderr)
        return 2
    print((Path(args.output) / "card_section.md").read_text(encoding="utf-8"))
    print(f"medeval report: wrote {len(report['written'])} files to {args.output}")
    if args.update_card:
        print(f"model card {args.update_card}: {'updated' if report['card_updated'] else 'already up to date'}")
    return 0


def _build_from_args(args: argparse.Namespace) -> dict[str, Any]:
    report = build_report(
        args.folders, Path(args.output), figures=not args.no_figures,
        update_card=Path(args.update_card) if args.update_card else None, model=args.model,
        source_name=args.source_name, source_url=args.source_url, include_partial_runs=args.include_partial_runs,
        model_name=args.model_name,
    )
    for note in report["notes"]:
        print(f"medeval report: note: {note}", file=sys.stderr)
    return report


def register_cli(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="model-index, results table, breakdowns and figures from lm-eval output folders")
    p.add_argument("folders", nargs="+", help="folders given to lm-eval's --output_path (or results_*.json files)")
    p.add_argument("--output", required=True, help="folder to write the report into")
    p.add_argument("--update-card", metavar="README.md", help="merge the results into this model card in place")
    p.add_argument("--model", help="with runs of several models: the one whose card is written/updated")
    p.add_argument("--model-name", help="the model's name on the card and in model_index.yaml (default: its Hub id, "
                   "or the local folder's name; a local path is never used)")
    p.add_argument("--include-partial-runs", action="store_true",
                   help="also put runs made with --limit into the model-index (left out by default: not comparable)")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)")
    p.add_argument("--source-name", help=f"model-index source name (default: {'lm-evaluation-harness with medeval-metrics'})")
    p.add_argument("--source-url", help="model-index source URL (default: the lm-evaluation-harness repository)")
    p.set_defaults(func=_cmd)
