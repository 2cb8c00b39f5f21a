"""``build_report``: the report's steps, in order (see ``medeval_metrics.report`` for what is written).

1. load the runs (``runs.load_runs``), check every number they publish (``metric_info``: refused, or left out
   and listed with ``skip_bad_numbers``) and that they hold a pack task;
2. the model-index per model (``model_card``), leaving ``--limit`` runs out unless asked;
3. the results tables (``tables``), per run and compared across runs;
4. breakdowns (recomputed from each run's samples, with ``medeval judge``'s re-scored metrics where it
   ran) and judge-score summaries;
5. figures (``figures``, matplotlib);
6. the model-card section, and the in-place card update;
7. ``report.json``.
"""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from medeval_metrics.report.runs import scored_samples
from medeval_metrics.report.tables import INTRO

MAX_FIGURE_CATEGORIES = 40  # beyond this a bar chart is unreadable: the largest categories are shown


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_") or "run"


MANIFEST = "report.json"
# What a report writes: only such files, listed in the previous report's manifest, are ever removed.
REPORT_FILE_SUFFIXES = (".md", ".json", ".yaml", ".png", ".html")


@dataclass
class _Output:
    """The report folder, and the files written into it (relative names, for ``report.json``)."""

    folder: Path
    written: list[str] = field(default_factory=list)

    def write(self, name: str, text: str, private: bool = False) -> None:
        """``private``: the file shows private text (0600, whatever the umask)."""
        with _writing(self.folder):
            from medeval_metrics.safe_files import atomic_write_text

            atomic_write_text(self.folder / name, text, private=private)
        self.written.append(name)


def _os_reason(exc: OSError) -> str:
    return exc.strerror or str(exc)


@contextmanager
def _writing(folder: Path):
    """An OSError while writing the report becomes one line naming the file and the reason."""
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.safe_files import MedevalWriteError

    try:
        yield
    except MedevalWriteError as exc:  # the file is absent or as it was: never half written
        cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else OSError(str(exc))
        raise MedevalDataError(
            f"{exc.path}: could not write the report file ({_os_reason(cause)}); the report in {folder} "
            "is incomplete. Free some space or fix the permissions, then re-run."
        ) from exc
    except OSError as exc:
        raise MedevalDataError(
            f"{exc.filename or folder}: could not write the report file ({_os_reason(exc)}); the report in {folder} "
            "is incomplete. Free some space or fix the permissions, then re-run."
        ) from exc


def _open_output(folder: Path) -> _Output:
    """The report folder, created; one line naming it and the reason when it cannot be written."""
    import tempfile

    from medeval_metrics.data import MedevalDataError

    try:
        if folder.exists() and not folder.is_dir():
            raise NotADirectoryError(20, "it is a file, not a folder", str(folder))
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):  # a folder can exist and still refuse new files
            pass
    except OSError as exc:
        raise MedevalDataError(
            f"--output {folder}: cannot write the report there ({_os_reason(exc)}). "
            "Pass --output a folder you can create and write to."
        ) from exc
    return _Output(folder)


def _previous_files(folder: Path) -> tuple[list[str], float]:
    """The files the previous report in ``folder`` wrote (its manifest's "written") and when it wrote them."""
    manifest = folder / MANIFEST
    try:
        previous = json.loads(manifest.read_text(encoding="utf-8"))
        written_at = manifest.stat().st_mtime
    except (OSError, ValueError):
        return [], 0.0
    names = previous.get("written") if isinstance(previous, dict) else None
    return ([n for n in names if isinstance(n, str)] if isinstance(names, list) else []), written_at


def _remove_stale_files(out: _Output, previous: list[str], previous_written_at: float) -> list[str]:
    """Remove what the previous report wrote and this one did not (figures of runs no longer reported,
    an old comparison), then the folders that left empty. Only a report file listed in the previous
    manifest, inside the report folder and unchanged since, is removed: the user's files stay."""
    root = out.folder.resolve()
    removed = []
    for name in sorted(set(previous) - set(out.written) - {MANIFEST}):
        path = out.folder / name
        try:
            inside = (
                path.resolve().is_relative_to(root) and not Path(name).is_absolute() and ".." not in Path(name).parts
            )
            if (
                not inside
                or not name.endswith(REPORT_FILE_SUFFIXES)
                or path.is_symlink()
                or not path.is_file()
                or path.stat().st_mtime > previous_written_at
            ):  # changed after that report: someone's edit
                continue
            path.unlink()
        except OSError:
            continue
        removed.append(name)
        for parent in Path(name).parents:
            if parent == Path("."):
                break
            try:
                (out.folder / parent).rmdir()  # only an empty folder goes
            except OSError:
                break
    return removed


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
    html: bool = False,
    html_show_private: bool = False,
    skip_bad_numbers: bool = False,
    public_tasks: tuple[str, ...] | list[str] = (),
) -> dict[str, Any]:
    """Write the report files (see ``medeval_metrics.report``); returns the contents of ``report.json``.

    ``skip_bad_numbers``: leave out (and list) the numbers that cannot be published instead of refusing them;
    ``public_tasks``: names (or ``fnmatch`` patterns) of tasks outside the pack whose item text is public, shown in
    report.html (the text of any other task outside the pack is hidden like private data)."""
    from medeval_metrics.pack import __version__
    from medeval_metrics.report import model_card, tables
    from medeval_metrics.report.runs import card_model_name

    if figures:  # fail before writing anything when the figures cannot be drawn
        from medeval_metrics.report.figures import _pyplot

        _pyplot()
    load_notes: list[str] = []
    runs, left_out = _load_runs(folders, load_notes, skip_bad_numbers)
    out = _open_output(Path(output))
    previous_files, previous_written_at = _previous_files(out.folder)
    source = {
        "source_name": source_name or model_card.DEFAULT_SOURCE_NAME,
        "source_url": source_url or model_card.DEFAULT_SOURCE_URL,
    }

    models: dict[str, list] = {}
    for run in runs:
        models.setdefault(run.model_name, []).append(run)
    publishable = {m: [r for r in rs if include_partial_runs or not r.partial] for m, rs in models.items()}
    card_model = _card_model(models, model)
    names = _card_names(models, card_model, model_name)
    index_files, notes = _write_model_indexes(out, models, publishable, source, names)
    notes = load_notes + [f"left out: {bad}" for bad in left_out] + notes

    sections = {run.label: tables.run_section(run, __version__) for run in runs}
    results_md = ["# medeval results", "", INTRO, ""]
    for text in sections.values():
        results_md += [text, ""]
    all_breakdowns = {run.label: b for run in runs if (b := run_breakdowns(run))}
    judge_collected = {run.label: c for run in runs if (c := _judge_scores(run))}
    results_md += _write_breakdowns(out, all_breakdowns)
    _write_judges(out, judge_collected, {run.label: run for run in runs})
    if len(runs) > 1:
        comparison = tables.comparison_table(runs)
        out.write("comparison.md", "# medeval comparison\n\n" + comparison + "\n")
        results_md += ["## Comparison", "", comparison, ""]
        notes += tables.version_notes(runs) + tables.task_settings_notes(runs)
    results_md += _left_out_section(left_out)
    out.write("results.md", "\n".join(results_md).rstrip() + "\n")

    with _writing(out.folder):
        figure_files = _write_figures(out, runs, all_breakdowns, judge_collected) if figures else []

    if html:  # one page to browse the report item by item (medeval_metrics.report.html)
        from medeval_metrics.report import html as page

        out.write(
            page.PAGE,
            page.render(
                runs,
                out.folder,
                figure_files,
                show_private=html_show_private,
                public_tasks=tuple(public_tasks),
                left_out=[str(bad) for bad in left_out],
            ),
            private=html_show_private,  # the page then shows private questions, notes and answers
        )
    card_sections = {run.label: tables.run_section(run, __version__, card=True) for run in runs}
    card_section = _card_section(card_sections, publishable[card_model] or models[card_model])
    out.write("card_section.md", card_section)
    removed = _remove_stale_files(out, previous_files, previous_written_at)
    if removed:
        notes.append(
            f"{out.folder}: removed {len(removed)} files the previous report there wrote and this one "
            f"does not (listed in its {MANIFEST}), e.g. {removed[0]}"
        )
    report = {
        "medeval_metrics_version": __version__,
        "runs": [
            {
                "label": run.label,
                "model": card_model_name(run.model_name),
                "results_file": str(run.results_path),
                "samples_files": {t: str(p) for t, p in run.sample_paths.items()},
                "scores": [row.__dict__ for row in tables.score_rows(run)],
            }
            for run in runs
        ],
        "model_index_files": index_files,
        "figures": figure_files,
        "written": sorted(out.written),
        "card_updated": None,
        "card_created": None,
        "notes": notes,
    }
    # the manifest (what the next report in this folder cleans up by) is written before the card is
    # touched, so that it lists this report's files even when the card cannot be written
    _write_manifest(out.folder, report)
    if update_card is not None:
        report["card_created"] = not Path(update_card).exists()
        report["card_updated"] = _update_card(
            Path(update_card), names[card_model], publishable[card_model], card_section, source
        )
        _write_manifest(out.folder, report)
    return report


def _write_manifest(folder: Path, report: dict[str, Any]) -> None:
    with _writing(folder):
        from medeval_metrics.safe_files import atomic_write_text

        atomic_write_text(folder / MANIFEST, json.dumps(report, indent=2, sort_keys=True) + "\n")


def _load_runs(folders: list[Path], notes: list[str], skip_bad_numbers: bool = False) -> tuple[list, list]:
    """The runs, and the numbers left out of them (``skip_bad_numbers``; without it, a bad number is an error)."""
    from medeval_metrics import registry
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.report import tables
    from medeval_metrics.report.runs import load_runs

    runs = load_runs([Path(f) for f in folders], notes)
    if not any(registry.benchmark_of(task) for run in runs for task in run.tasks()):
        raise MedevalDataError(
            f"{', '.join(str(f) for f in folders)}: no medeval task in these results. "
            "Pass the output folder of a run of the pack's tasks (`medeval list` shows them)."
        )
    # the samples first: a per-item value taken out there changes nothing the score rows read from them
    bad = [problem for run in runs for problem in tables.sample_problems(run)]
    bad += [problem for run in runs for problem in tables.bad_numbers(run)]
    if bad and not skip_bad_numbers:
        more = f" (and {len(bad) - 1} more numbers that cannot be published)" if len(bad) > 1 else ""
        raise MedevalDataError(
            f"{bad[0]}{more}. The file was edited or damaged, or a scorer is broken: restore it or run the "
            "evaluation again; --skip-bad-numbers leaves such numbers out of the report and lists them."
        )
    return runs, bad


def _left_out_section(left_out: list) -> list[str]:
    """results.md's list of the numbers ``--skip-bad-numbers`` left out."""
    if not left_out:
        return []
    return [
        "## Numbers left out",
        "",
        "Numbers that cannot be published, left out of every table, figure and model-index entry "
        f"(--skip-bad-numbers): {len(left_out)}.",
        "",
        *[f"- {bad}" for bad in left_out],
        "",
    ]


def _card_names(models: dict[str, list], card_model: str, model_name: str | None) -> dict[str, str]:
    """The name each model gets on a card: its repo id or folder name, never a local path;
    ``--model-name`` overrides the card model's."""
    from medeval_metrics.report.runs import card_model_name

    return {m: (model_name if model_name and m == card_model else card_model_name(m)) for m in models}


def _write_model_indexes(
    out: _Output, models: dict[str, list], publishable: dict[str, list], source: dict[str, str], names: dict[str, str]
) -> tuple[dict[str, str], list[str]]:
    """One model-index per model; runs with --limit stay out of card metadata unless asked for."""
    from medeval_metrics.report import model_card

    index_files, notes = {}, []
    for raw_name, model_runs in publishable.items():
        if not model_runs:
            notes.append(
                f"{names[raw_name]}: no model-index written: every run used --limit (partial test sets); "
                "pass --include-partial-runs to publish them anyway"
            )
            continue
        results = model_card.runs_eval_results(model_runs, **source)
        if not results:
            notes.append(f"{names[raw_name]}: no model-index written: none of its scores can be published")
            continue
        name = "model_index.yaml" if len(models) == 1 else f"model_index_{_slug(names[raw_name])}.yaml"
        out.write(name, model_card.model_index_yaml(names[raw_name], results))
        index_files[names[raw_name]] = name
    return index_files, notes


def run_breakdowns(run) -> dict[str, Any]:
    """``{task: breakdown}`` for each task of the run with logged samples and a breakdown; a task read several ways
    has its readings in the order the report shows them (the headline reading first; lm-eval logs them in the
    YAML's order)."""
    from medeval_metrics import registry
    from medeval_metrics.breakdown import task_breakdown
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.report.metric_info import ordered_filters

    out = {}
    for task in sorted(run.sample_paths):
        try:
            breakdown = task_breakdown(task, scored_samples(run, task))
        except MedevalDataError as exc:  # a record whose doc the breakdown cannot read: name its file
            raise MedevalDataError(f"{run.sample_paths[task]}: {exc}") from None
        if breakdown is not None:
            spec = registry.benchmark_of(task)
            out[task] = {f: breakdown[f] for f in ordered_filters(spec.name if spec else "", breakdown)}
    return out


def headline_samples(run, task: str) -> list[dict[str, Any]]:
    """The task's logged samples under its headline reading: lm-eval logs each doc once per filter, and a doc's
    judges, read once per filter, would count once per filter."""
    from medeval_metrics import registry
    from medeval_metrics.report.metric_info import headline_filter

    samples = run.samples(task)
    filters = {str(s.get("filter") or "none") for s in samples}
    if len(filters) < 2:
        return samples
    spec = registry.benchmark_of(task)
    headline = headline_filter(spec.name if spec else "", filters)
    return [s for s in samples if str(s.get("filter") or "none") == headline]


def _judge_scores(run) -> dict[str, Any]:
    """``{task: {judge: {dimension: [scores]}}}`` from the run's samples or ``medeval judge``'s records."""
    from medeval_metrics.report import judges

    out = {}
    for task in sorted(set(run.sample_paths) | set(run.results.get("medeval_judge", {}))):
        collected = judges.collect_judge_scores(run.judge_records(task) or headline_samples(run, task))
        if collected:
            out[task] = collected
    return out


def _write_breakdowns(out: _Output, all_breakdowns: dict[str, dict[str, Any]]) -> list[str]:
    """``breakdowns.{json,md}``; returns the lines pointing at them from results.md."""
    from medeval_metrics.breakdown import breakdown_markdown

    if not all_breakdowns:
        return []
    out.write("breakdowns.json", json.dumps(all_breakdowns, indent=2, sort_keys=True) + "\n")
    md = []
    for label, per_task in all_breakdowns.items():
        md += [f"## {label}", ""]
        md += [breakdown_markdown(task, b) + "\n" for task, b in sorted(per_task.items())]
    out.write("breakdowns.md", "\n".join(md))
    return ["Per-category breakdowns: [breakdowns.md](breakdowns.md).", ""]


def _write_judges(out: _Output, judge_collected: dict[str, dict[str, Any]], runs: dict[str, Any]) -> None:
    from medeval_metrics.report import judges, tables

    if not judge_collected:
        return
    summaries = {
        label: {task: judges.scores_by_judge_and_dimension(c) for task, c in per_task.items()}
        for label, per_task in judge_collected.items()
    }
    out.write("judges.json", json.dumps(summaries, indent=2, sort_keys=True) + "\n")
    md = []
    for label, per_task in summaries.items():
        scripted = runs[label].judges_scripted
        md += [f"## {label}", ""] + [tables.judge_table(t, s, scripted) + "\n" for t, s in sorted(per_task.items())]
    out.write("judges.md", "\n".join(md))


def _figure_categories(values: dict[str, dict[str, float]]) -> tuple[dict[str, dict[str, float]], str]:
    """The categories to plot (all, or the MAX_FIGURE_CATEGORIES with most items) and a title note."""
    if len(values) <= MAX_FIGURE_CATEGORIES:
        return values, ""
    largest = sorted(values, key=lambda c: (-values[c]["n"], c))[:MAX_FIGURE_CATEGORIES]
    return {c: values[c] for c in sorted(largest)}, f" ({MAX_FIGURE_CATEGORIES} largest of {len(values)})"


def _figure_dimensions(breakdown: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(filter, dimension, categories) worth one figure each."""
    return [(f, d, cats) for f, dims in breakdown.items() for d, cats in dims.items() if cats]


def _unsuffixed_filter(benchmark: str, breakdown: dict[str, Any]) -> str:
    """The filter whose figures keep the plain name: the task's only or headline one (a figure's name then stays
    the same from a task version with one reading to one with several)."""
    from medeval_metrics.report.metric_info import headline_filter

    return headline_filter(benchmark, list(breakdown))


def _write_figures(
    out: _Output, runs: list, all_breakdowns: dict[str, Any], judge_collected: dict[str, Any]
) -> list[str]:
    """Per-category figures of each breakdown (its primary metric), judge score distributions, comparisons."""
    from medeval_metrics.breakdown import spec_for_task
    from medeval_metrics.report import figures as fig
    from medeval_metrics.report.metric_info import is_proportion, metric_info
    from medeval_metrics.report.tables import headline_mark, task_primary_metric

    figure_files: list[str] = []
    for run in runs:
        folder = Path("figures") / _slug(run.label)
        for task, breakdown in all_breakdowns.get(run.label, {}).items():
            # a task outside the pack named like a pack task's variant has its breakdown: its first metric
            benchmark, primary = task_primary_metric(task, spec_for_task(task).metrics)
            info = metric_info(benchmark, primary)
            proportion = is_proportion(
                benchmark, primary, [s[primary] for s in scored_samples(run, task) if primary in s]
            )
            label = f"{info.label} (scripted)" if info.from_judges and run.judges_scripted() else info.label
            plain = _unsuffixed_filter(benchmark, breakdown)
            for filter_name, dimension, cats in _figure_dimensions(breakdown):
                values, note = _figure_categories({c: m[primary] for c, m in cats.items() if primary in m})
                if not values:
                    continue
                suffix = "" if filter_name in ("none", plain) else f"__{_slug(filter_name)}"
                name = folder / f"{task}__{_slug(dimension)}{suffix}.png"
                # a task read several ways: the title names the reading (the headline one says so)
                marked = ", headline" if headline_mark(benchmark, filter_name) else ""
                reading = "" if len(breakdown) < 2 else f" ({filter_name}{marked})"
                title = f"{label}{reading} by {fig.human(dimension)}{note}: {task}, {run.label}"
                fig.category_scores_figure(
                    out.folder / name, title, label, values, info.scale, dimension=dimension, proportion=proportion
                )
                figure_files.append(name.as_posix())
        for task, collected in judge_collected.get(run.label, {}).items():
            name = folder / f"{task}__judge_scores.png"
            scripted = " (scripted judges)" if run.judges_scripted() else ""
            fig.judge_distribution_figure(out.folder / name, f"Judge scores{scripted}: {task}, {run.label}", collected)
            figure_files.append(name.as_posix())
    if len(runs) > 1:
        figure_files += _comparison_figures(runs, out.folder, fig)
    out.written += figure_files
    return figure_files


def _comparison_figures(runs, output: Path, fig) -> list[str]:
    """One comparison figure per benchmark: its primary metric per task, one bar per run."""
    from medeval_metrics.report import tables
    from medeval_metrics.report.metric_info import metric_info, reporting_for

    # one figure per (benchmark, primary metric): tasks whose headline metric differs get their own
    per_figure: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
    proportions: dict[tuple[str, str], bool] = {}
    scripted: dict[tuple[str, str], bool] = {}
    for run in runs:
        rows = tables.score_rows(run)
        filters = tables.task_filters(rows)
        for row in rows:
            if not row.in_pack or row.metric != tables.task_primary_metric(row.task)[1]:
                continue
            if row.filter != tables._headline_filter(row, filters):  # a task read several ways: its headline
                continue
            key = (row.benchmark, row.metric)
            per_figure.setdefault(key, {}).setdefault(row.task, {})[run.label] = {
                "value": row.value,
                "stderr": row.stderr,
                "n": row.n,
            }
            # one method per figure: Wilson's only where every run's row is a proportion
            proportions[key] = proportions.get(key, True) and row.proportion
            scripted[key] = scripted.get(key, False) or row.scripted
    names = []
    for (benchmark, metric), series in sorted(per_figure.items()):
        info = metric_info(benchmark, metric)
        primary = tables.primary_metric(benchmark, [])
        name = (
            f"comparison__{_slug(benchmark)}.png"
            if metric == primary
            else f"comparison__{_slug(benchmark)}__{_slug(metric)}.png"
        )
        display = reporting_for(benchmark).display_name or benchmark
        label = f"{info.label} (scripted)" if scripted[(benchmark, metric)] else info.label
        fig.comparison_figure(
            output / name,
            f"{label}: {display}, run by run",
            label,
            series,
            info.scale,
            proportion=proportions[(benchmark, metric)],
        )
        names.append(name)
    return names


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


def _card_section(sections: dict[str, str], card_runs: list) -> str:
    return (
        "\n".join(
            ["## Medical QA evaluation (medeval)", "", INTRO, ""]
            + [sections[run.label].replace("### ", "#### ", 1) + "\n" for run in card_runs]
        ).rstrip()
        + "\n"
    )


def _update_card(
    card: Path, card_model: str, publishable_runs: list, card_section: str, source: dict[str, str]
) -> bool:
    from medeval_metrics.data import MedevalDataError
    from medeval_metrics.report import model_card

    if not publishable_runs:
        raise MedevalDataError(
            f"{card_model}: every run used --limit, so its scores cover part of the test sets; the card was "
            "not changed. Run on the full sets, or pass --include-partial-runs to publish partial scores."
        )
    return model_card.update_card(
        card, card_model, model_card.runs_eval_results(publishable_runs, **source), card_section
    )
