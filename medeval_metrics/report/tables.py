"""Rows of scores from runs, and the Markdown tables built from them (results, comparison, judges)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# primary_metric, task_primary_metric: in metric_info (its number checks read them), still named here
from medeval_metrics.report.metric_info import metric_info, primary_metric, task_primary_metric  # noqa: F401
from medeval_metrics.report.runs import Run

INTRO = (
    "Scores from lm-evaluation-harness with the medeval-metrics task pack. "
    "± is the standard error of the mean; sample counts are items scored."
)


@dataclass(frozen=True)
class ScoreRow:
    task: str
    benchmark: str  # "" for a task outside the pack
    version: Any
    filter: str
    metric: str
    value: float
    stderr: float | None  # None where lm-eval reported "N/A"
    n_shot: Any
    samples: int | None  # items scored (lm-eval's "effective" count)
    samples_total: int | None  # items in the test set
    in_pack: bool = True  # a task outside the pack (a user's suite) is shown, never put into the model-index

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.task, self.metric, self.filter)


def score_rows(run: Run) -> list[ScoreRow]:
    """Every metric of every task in the run whose numbers can be published (``metric_info.value_problem``): the pack's
    tasks, then tasks outside the pack (a user's suite, under lm-eval's metric names)."""
    return _scored(run)[0]


def bad_numbers(run: Run) -> list:
    """The run's values and stderrs that cannot be published (``metric_info.BadNumber``), left out of
    ``score_rows``."""
    return _scored(run)[1]


def sample_problems(run: Run) -> list:
    """The per-item values of ``run``'s samples (and ``medeval judge``'s records) that cannot be published; each is
    taken out of the run's records, so that no breakdown, figure or item on the page shows it."""
    from medeval_metrics.report.judges import judge_scores_of
    from medeval_metrics.report.metric_info import BadNumber, item_metrics, metric_range, value_problem

    bad: list[BadNumber] = []
    for task in sorted(set(run.sample_paths) | set(run.results.get("medeval_judge", {}))):
        benchmark, metrics = item_metrics(task)
        path, judged_path = run.sample_paths.get(task), run.judged_path(task)
        sources = [(path, record, record) for record in run.samples(task)]
        sources += [(judged_path, record, record.get("metrics") or {}) for record in run.judge_records(task)]
        for file, record, values in sources:
            item = f"item {record.get('doc_id')}"
            for metric in metrics:
                value = values.get(metric)
                problem = None if value is None else value_problem(value, metric_range(benchmark, metric))
                if problem:
                    bad.append(BadNumber(file, task, f"{metric} ({item})", problem))
                    del values[metric]
            for judge, scores in (judge_scores_of(record, finite_only=False) or {}).items():
                for dimension, score in scores.items():
                    if score is not None and not math.isfinite(score):
                        where = f"judge {judge}'s {dimension} ({item})"
                        bad.append(BadNumber(file, task, where, f"{score} is not finite"))
    return bad


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _scored(run: Run) -> tuple[list[ScoreRow], list]:
    from medeval_metrics import registry
    from medeval_metrics.report.metric_info import NO_VALUE, BadNumber, metric_range, stderr_problem, value_problem

    results = run.results
    rows, bad = [], []
    for task, metrics in sorted(results.get("results", {}).items()):
        benchmark = registry.benchmark_of(task)
        name = benchmark.name if benchmark else ""
        counts = results.get("n-samples", {}).get(task, {})
        computed = _from_samples(run, task, metrics)
        # the results' values, then figures lm-eval does not give, computed by the report from the samples
        values = [(key, value, True) for key, value in metrics.items()]
        values += [(key, value, False) for key, value in computed.items() if key not in metrics]
        for key, value, from_file in values:
            if "," not in key or "_stderr," in key or value == NO_VALUE:  # "N/A": a statistic without a value
                continue
            metric, filter_name = key.split(",", 1)
            where = f"{metric} (filter {filter_name})"
            problem = value_problem(value, metric_range(name, metric)) if from_file else None
            if problem:
                bad.append(BadNumber(run.results_path, task, where, problem))
                continue
            if not _is_number(value):  # the report's own figure without a value
                continue
            stderr = metrics.get(f"{metric}_stderr,{filter_name}")
            problem = stderr_problem(stderr)
            if problem:
                bad.append(BadNumber(run.results_path, task, f"{metric}_stderr (filter {filter_name})", problem))
                stderr = None
            if not _is_number(stderr):  # "N/A" from lm-eval: the samples' own, where they give one (NaN: none)
                stderr = computed.get(f"{metric}_stderr,{filter_name}")
            rows.append(
                ScoreRow(
                    task=task,
                    benchmark=name,
                    version=results.get("versions", {}).get(task, "?"),
                    filter=filter_name,
                    metric=metric,
                    value=float(value),
                    stderr=float(stderr) if _is_number(stderr) else None,
                    n_shot=results.get("n-shot", {}).get(task, "?"),
                    samples=counts.get("effective"),
                    samples_total=counts.get("original"),
                    in_pack=benchmark is not None,
                )
            )
    order = {task: registry.task(task).metrics for task in {r.task for r in rows if r.in_pack}}
    rows.sort(key=lambda r: (not r.in_pack, r.task, _metric_position(order.get(r.task, ()), r.metric), r.filter))
    return rows, bad


def _from_samples(run: Run, task: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """Figures lm-eval does not give, as results keys, from the logged samples: corpus statistics' stderrs
    (``_corpus_stderrs``) and, for a judged task (``report.judges.sample_statistics``), per-judge success rows
    the results lack and their stderrs (from ``medeval judge``'s records where it re-judged)."""
    from medeval_metrics import registry

    cache = getattr(run, "_sample_statistics", None)
    if cache is None:  # kept on the run: score_rows is called once per table, the samples read once
        cache = {}
        run._sample_statistics = cache  # type: ignore[attr-defined]
    if task not in cache:
        cache[task] = _corpus_stderrs(run, task, metrics)
        if registry.judging_for(task) is not None:
            from medeval_metrics.report.judges import sample_statistics

            filters = [key.split(",", 1)[1] for key in metrics if key.startswith("judge_verdicts,")]
            stats = sample_statistics(run.judge_records(task) or run.samples(task), filters[0] if filters else "none")
            for (metric, filter_name), entry in stats.items():
                if f"{metric},{filter_name}" not in metrics:
                    cache[task][f"{metric},{filter_name}"] = entry["value"]
                if entry["stderr"] is not None:
                    cache[task][f"{metric}_stderr,{filter_name}"] = entry["stderr"]
    return cache[task]


def _corpus_stderrs(run: Run, task: str, metrics: dict[str, Any]) -> dict[str, float]:
    """Stderrs of the corpus statistics whose spec names a sample_stderr function, from the logged per-item
    values (lm-eval writes "N/A" for an aggregation it does not know); none without two logged items."""
    import importlib

    from medeval_metrics import registry

    spec = registry.benchmark_of(task)
    out: dict[str, float] = {}
    for key in metrics:
        metric, _, filter_name = key.partition(",")
        info = spec.reporting.metrics.get(metric) if spec else None
        if not filter_name or "_stderr" in metric or info is None or info.sample_stderr is None:
            continue
        items = [
            sample[metric]
            for sample in run.samples(task)
            if str(sample.get("filter") or "none") == filter_name and sample.get(metric) is not None
        ]
        if len(items) > 1:
            module, _, function = info.sample_stderr.partition(":")
            out[f"{metric}_stderr,{filter_name}"] = float(getattr(importlib.import_module(module), function)(items))
    return out


def _metric_position(task_metrics: tuple[str, ...], metric: str) -> int:
    return task_metrics.index(metric) if metric in task_metrics else len(task_metrics)


def _fmt(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.4f}"


def _samples_text(row: ScoreRow) -> str:
    if row.samples is None:
        return "?"
    if row.samples_total is not None and row.samples_total != row.samples:
        return f"{row.samples:,} of {row.samples_total:,}"
    return f"{row.samples:,}"


# Per-item bookkeeping the tasks emit as metrics, not scores: said in a note below the table, not as a row.
HELPER_METRICS = {"judge_computed": "share of items the judge panel was asked about"}


def helper_notes(rows: list[ScoreRow]) -> list[str]:
    return [
        f"`{row.task}` {row.metric} = {_fmt(row.value)} ({HELPER_METRICS[row.metric]}; bookkeeping, not a score)"
        for row in rows
        if row.metric in HELPER_METRICS
    ]


def results_table(rows: list[ScoreRow]) -> str:
    header = "| Task | Version | Filter | n-shot | Metric | Value | ± Stderr | Samples |"
    lines = [header, "|---|---|---|---|---|---:|---:|---:|"]
    for row in rows:
        if row.metric in HELPER_METRICS:
            continue
        info = metric_info(row.benchmark, row.metric)
        lines.append(
            f"| `{row.task}` | {row.version} | {row.filter} | {row.n_shot} | {info.label} (`{row.metric}`) "
            f"| {_fmt(row.value)} | {_fmt(row.stderr)} | {_samples_text(row)} |"
        )
    return "\n".join(lines)


def run_time_table(run: Run) -> str:
    """Each task's wall time (and, for a judged task, the judges' requests and tokens) as ``medeval run``
    recorded them in the results (``lm_eval_compat.run_record``); "" for a run without the record."""
    recorded = (run.results.get("medeval_run") or {}).get("tasks") or {}
    if not recorded:
        return ""
    lines = [
        "| Task | Wall time (s) | of which model (s) | of which judging (s) | Judge requests | Judge tokens "
        "(prompt + completion) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for task, entry in sorted(recorded.items()):
        judge = entry.get("judge") or {}
        tokens = (
            f"{judge.get('prompt_tokens', 0):,} + {judge.get('completion_tokens', 0):,}"
            if "prompt_tokens" in judge or "completion_tokens" in judge
            else "–"
        )
        lines.append(
            f"| `{task}` | {entry.get('wall_s', 0):.1f} | {entry.get('model_s', 0):.1f} | "
            f"{entry.get('filters_s', 0):.1f} | {judge.get('requests', '–') if judge else '–'} | "
            f"{tokens if judge else '–'} |"
        )
    return "\n".join(lines)


def settings_table(settings: dict[str, str]) -> str:
    lines = ["| Setting | Value |", "|---|---|"]
    lines += [f"| {name} | {value.replace('|', '/')} |" for name, value in settings.items()]
    return "\n".join(lines)


def comparison_rows(rows: list[ScoreRow]) -> list[ScoreRow]:
    """The rows a reader compares models by: the metrics the benchmark publishes in the model-index (none of a
    task outside the pack). Bookkeeping (items judged, per-judge success, id echoes), diagnostics and a user's
    own tasks stay in the report's results.md."""
    return [row for row in rows if row.in_pack and metric_info(row.benchmark, row.metric).in_model_index]


def outside_note(rows: list[ScoreRow]) -> str:
    """Says which tasks are not the pack's: their numbers are lm-eval's, with no range the pack knows."""
    outside = sorted({row.task for row in rows if not row.in_pack})
    if not outside:
        return ""
    return (
        f"{', '.join(f'`{t}`' for t in outside)}: not a task of the pack (a suite of your own): scores as lm-eval "
        "gave them, under its metric names, not in the model-index"
    )


def run_section(run: Run, pack_version: str, heading: str = "###", card: bool = False) -> str:
    """A run's results table and settings; ``card``: only the comparison metrics (``comparison_rows``)."""
    rows = score_rows(run)
    settings = {**run.settings(), "medeval-metrics version (report)": pack_version}
    shown = comparison_rows(rows) if card else rows
    parts = [f"{heading} {run.label}", "", results_table(shown) if shown else "_No medeval task in this run._", ""]
    left = len({(r.task, r.metric) for r in rows}) - len({(r.task, r.metric) for r in shown})
    notes = [] if card else helper_notes(rows) + [n for n in [outside_note(rows)] if n]
    if card and left:
        notes = [
            f"{left} bookkeeping and diagnostic metrics (items judged, per-judge success, unparseable rates) "
            "are in the report's results.md"
        ]
    if notes:
        parts += ["Notes: " + "; ".join(notes) + ".", ""]
    timing = "" if card else run_time_table(run)
    if timing:
        parts += ["Run time per task and judge usage:", "", timing, ""]
    parts += ["Settings that change scores:", "", settings_table(settings)]
    generation = _task_generation_settings(run, [r.task for r in shown])
    if generation:
        parts += ["", "Generation settings per task (task YAML, after command-line overrides):", "", generation]
    return "\n".join(parts)


def _task_generation_settings(run: Run, tasks: list[str]) -> str:
    from medeval_metrics.report.runs import redact

    lines = []
    for task in dict.fromkeys(tasks):
        config = run.results.get("configs", {}).get(task, {})
        kwargs = config.get("generation_kwargs")
        if isinstance(kwargs, dict):
            shown = {k: v for k, v in kwargs.items() if k != "until"}
            text = ", ".join(f"{k}={v}" for k, v in shown.items())
            lines.append(f"- `{task}`: {redact(text)}")
    return "\n".join(lines)


def version_notes(runs: list[Run]) -> list[str]:
    """One line per task the runs evaluated at different task versions: their scores may not be comparable."""
    versions: dict[str, dict[str, list[str]]] = {}
    for run in runs:
        for task in dict.fromkeys(row.task for row in score_rows(run)):
            version = str(run.results.get("versions", {}).get(task, "?"))
            versions.setdefault(task, {}).setdefault(version, []).append(run.label)
    notes = []
    for task, by_version in sorted(versions.items()):
        known = {v: labels for v, labels in by_version.items() if v != "?"}
        if len(known) > 1:
            each = "; ".join(f"version {v} in {', '.join(labels)}" for v, labels in known.items())
            notes.append(f"`{task}` was run at different task versions ({each}): its scores may not be comparable")
    return notes


def comparison_table(runs: list[Run]) -> str:
    """One row per (task, metric, filter), one column per run: value ± stderr (n); below it, a note for each task
    run at different task versions."""
    per_run = [{row.key: row for row in score_rows(run)} for run in runs]
    keys = sorted({key for rows in per_run for key in rows if key[1] not in HELPER_METRICS})
    if not keys:
        return "_No medeval task in these runs._"
    header = "| Task | Metric | Filter | " + " | ".join(run.label.replace("|", "/") for run in runs) + " |"
    lines = [header, "|---|---|---|" + "---:|" * len(runs)]
    for key in keys:
        cells = []
        for rows in per_run:
            row = rows.get(key)
            cells.append("–" if row is None else f"{_fmt(row.value)} ± {_fmt(row.stderr)} (n={row.samples})")
        lines.append(f"| `{key[0]}` | {key[1]} | {key[2]} | " + " | ".join(cells) + " |")
    notes = version_notes(runs)
    if notes:
        lines += ["", "Notes: " + "; ".join(notes) + "."]
    return "\n".join(lines)


def _judge_stderr(cell: dict[str, Any]) -> str:
    return "N/A" if cell.get("stderr") is None or cell.get("n", 0) < 2 else f"{cell['stderr']:.3f}"


def judge_table(task: str, summary: dict[str, dict[str, dict[str, float]]]) -> str:
    """Mean judge score per judge and dimension: ``summary[judge][dimension] = {value, stderr, n}``."""
    dimensions = sorted({d for per_judge in summary.values() for d in per_judge})
    lines = [
        f"**{task}**: judge scores (mean ± stderr, n)",
        "",
        "| Judge | " + " | ".join(dimensions) + " |",
        "|---|" + "---:|" * len(dimensions),
    ]
    for judge in sorted(summary):
        cells = []
        for dimension in dimensions:
            cell = summary[judge].get(dimension)
            cells.append("–" if cell is None else f"{cell['value']:.3f} ± {_judge_stderr(cell)} ({cell['n']})")
        lines.append(f"| {judge} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
