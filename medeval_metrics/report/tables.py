"""Rows of scores from runs, and the Markdown tables built from them (results, comparison, judges)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

# primary_metric, task_primary_metric: in metric_info (its number checks read them), still named here
from medeval_metrics.report.metric_info import metric_info, primary_metric, task_primary_metric  # noqa: F401
from medeval_metrics.report.runs import Run

INTRO = (
    "Scores from lm-evaluation-harness with the medeval-metrics task pack. "
    '± is the standard error of the mean; sample counts are items scored ("partial": a --limit run, '
    "not comparable with full runs)."
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
    partial: bool = False  # a --limit run scored part of the task's items
    n: int | None = None  # items the mean is over (the logged items with a value, else ``samples``)
    proportion: bool = False  # a mean of per-item 0/1 values: Wilson interval (``stats.interval``)
    scripted: bool = False  # a judge panel's number from scripted judges (``Run.scripted_judges``: the demo)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.task, self.metric, self.filter)

    def interval(self):
        """The row's 95% interval (``stats.interval``), None where it has none."""
        from medeval_metrics.report.metric_info import metric_range
        from medeval_metrics.stats import interval

        return interval(self.value, self.stderr, self.n, self.proportion, metric_range(self.benchmark, self.metric))


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
        ranges = {metric: metric_range(benchmark, metric) for metric in metrics}  # once, not per item and filter
        path, judged_path = run.sample_paths.get(task), run.judged_path(task)
        sources = [(path, record, record) for record in run.samples(task)]
        sources += [(judged_path, record, record.get("metrics") or {}) for record in run.judge_records(task)]
        for file, record, values in sources:
            item = f"item {record.get('doc_id')}"
            for metric in metrics:
                value = values.get(metric)
                problem = None if value is None else value_problem(value, ranges[metric])
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
    """Once per run (each table asks for the rows; the report checks the samples' values first, ``_load_runs``)."""
    cached = getattr(run, "_scored_rows", None)
    if cached is None:
        cached = _score(run)
        run._scored_rows = cached  # type: ignore[attr-defined]
    return list(cached[0]), list(cached[1])


def _score(run: Run) -> tuple[list[ScoreRow], list]:
    from medeval_metrics import registry
    from medeval_metrics.report.metric_info import (
        NO_VALUE,
        BadNumber,
        is_proportion,
        metric_range,
        stderr_problem,
        value_problem,
    )
    from medeval_metrics.report.runs import _covers_the_whole_set

    results = run.results
    rows, bad = [], []
    for task, metrics in sorted(results.get("results", {}).items()):
        benchmark = registry.benchmark_of(task)
        name = benchmark.name if benchmark else ""
        counts = results.get("n-samples", {}).get(task, {})
        partial = run.partial and not _covers_the_whole_set(counts)
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
            info = metric_info(name, metric)
            logged = _logged_values(run, task, metric, filter_name)
            n = run._sample_counts.get((task, metric, filter_name))  # type: ignore[attr-defined]
            if n is None:  # the logged items with a value (a number, or a record valued by its aggregation)
                numbers = sum(1 for v in logged if _is_number(v))
                n = (numbers or len(logged)) if logged else counts.get("effective")
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
                    partial=partial,
                    n=n if isinstance(n, int) else None,
                    proportion=is_proportion(name, metric, logged),
                    scripted=info.from_judges and run.judges_scripted(_judge_named_by(name, metric)),
                )
            )
    order = {task: registry.task(task).metrics for task in {r.task for r in rows if r.in_pack}}
    filters = task_filters(rows)  # a task's readings: the headline one first
    rows.sort(
        key=lambda r: (
            not r.in_pack,
            r.task,
            _metric_position(order.get(r.task, ()), r.metric),
            filters[r.task].index(r.filter),
        )
    )
    return rows, bad


def task_filters(rows: list[ScoreRow]) -> dict[str, list[str]]:
    """Each task's filters among ``rows``, in the order the report shows its readings (``ordered_filters``: the
    spec's headline reading first)."""
    from medeval_metrics.report.metric_info import ordered_filters

    found: dict[str, tuple[str, list[str]]] = {}
    for row in rows:
        found.setdefault(row.task, (row.benchmark, []))[1].append(row.filter)
    return {task: ordered_filters(benchmark, names) for task, (benchmark, names) in found.items()}


def _headline_filter(row: ScoreRow, filters: dict[str, list[str]]) -> str:
    from medeval_metrics.report.metric_info import headline_filter

    return headline_filter(row.benchmark, filters.get(row.task, [row.filter]))


def headline_mark(benchmark: str, filter_name: str) -> str:
    """ " (headline)" after a filter its spec names the headline reading; "" otherwise (a task outside the pack read
    several ways is shown with its filters side by side, none of them called the headline)."""
    from medeval_metrics.report.metric_info import reading_of

    reading = reading_of(benchmark, filter_name)
    return " (headline)" if reading is not None and reading.headline else ""


def once_across_readings(rows: list[ScoreRow]) -> list[ScoreRow]:
    """``rows`` with a metric that is the same under every reading (``MetricInfo.across_readings``) kept once, under
    the task's headline reading; where its values differ between readings (they should not), every row stays."""
    filters = task_filters(rows)
    values: dict[tuple[str, str], set[float]] = {}
    for row in rows:
        values.setdefault((row.task, row.metric), set()).add(round(row.value, 12))
    return [
        row
        for row in rows
        if not (
            len(filters[row.task]) > 1
            and metric_info(row.benchmark, row.metric).across_readings
            and len(values[(row.task, row.metric)]) == 1
            and row.filter != _headline_filter(row, filters)
        )
    ]


EACH_READING = "each reading"  # the filter cell of a metric shown once for every reading


def filter_text(row: ScoreRow, filters: dict[str, list[str]]) -> str:
    """The row's filter as a table shows it: for a task read several ways, the headline reading marked, and a metric
    the same under every reading (``once_across_readings``) as "each reading"; else the filter's name alone."""
    if len(filters.get(row.task, ())) < 2:
        return row.filter
    if metric_info(row.benchmark, row.metric).across_readings:
        return EACH_READING
    return row.filter + headline_mark(row.benchmark, row.filter)


def _from_samples(run: Run, task: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """Figures lm-eval does not give, as results keys, from the logged samples: corpus statistics' stderrs
    (``_corpus_stderrs``) and, for a judged task (``report.judges.sample_statistics``), per-judge success rows
    the results lack and their stderrs (from ``medeval judge``'s records where it re-judged)."""
    from medeval_metrics import registry

    cache = getattr(run, "_sample_statistics", None)
    if cache is None:  # kept on the run: score_rows is called once per table, the samples read once
        cache = {}
        run._sample_statistics = cache  # type: ignore[attr-defined]
        run._sample_counts = {}  # type: ignore[attr-defined]
    counts = run._sample_counts  # type: ignore[attr-defined]
    if task not in cache:
        cache[task] = _corpus_stderrs(run, task, metrics)
        if registry.judging_for(task) is not None:
            from medeval_metrics.report.judges import sample_statistics

            filters = [key.split(",", 1)[1] for key in metrics if key.startswith("judge_verdicts,")]
            stats = sample_statistics(run.judge_records(task) or run.samples(task), filters[0] if filters else "none")
            for (metric, filter_name), entry in stats.items():
                counts[(task, metric, filter_name)] = entry["n"]  # the items behind it
                if f"{metric},{filter_name}" not in metrics:
                    cache[task][f"{metric},{filter_name}"] = entry["value"]
                if entry["stderr"] is not None:
                    cache[task][f"{metric}_stderr,{filter_name}"] = entry["stderr"]
    return cache[task]


def _corpus_stderrs(run: Run, task: str, metrics: dict[str, Any]) -> dict[str, float]:
    """Stderrs of the corpus statistics whose spec names a sample_stderr function, from the logged per-item
    values (lm-eval writes "N/A" for an aggregation it does not know); none without two logged items."""
    from medeval_metrics import registry
    from medeval_metrics.spec import named_function

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
            out[f"{metric}_stderr,{filter_name}"] = float(named_function(info.sample_stderr)(items))
    return out


def _logged_values(run: Run, task: str, metric: str, filter_name: str) -> list[Any]:
    """The per-item values of ``metric`` under ``filter_name`` in the task's logged samples (after ``medeval judge``,
    its re-scored ones); [] without samples."""
    cache = getattr(run, "_logged_values", None)
    if cache is None:
        cache = {}
        run._logged_values = cache  # type: ignore[attr-defined]
    if task not in cache:  # by filter: lm-eval logs each doc once per filter, and each row reads one filter's
        from medeval_metrics.report.runs import scored_samples

        by_filter: dict[str, list[dict[str, Any]]] = {}
        samples = scored_samples(run, task) if task in run.sample_paths or run.judge_records(task) else []
        for sample in samples:
            by_filter.setdefault(str(sample.get("filter") or "none"), []).append(sample)
        cache[task] = by_filter
    return [sample[metric] for sample in cache[task].get(filter_name, ()) if sample.get(metric) is not None]


def _judge_named_by(benchmark: str, metric: str) -> str | None:
    """The judge a per-judge metric is about (what its spec's ``prefix*`` entry leaves), None for a panel metric."""
    from medeval_metrics.report.metric_info import reporting_for

    reporting = reporting_for(benchmark)
    if metric in reporting.metrics:
        return None
    patterns = [key for key in reporting.metrics if key.endswith("*") and metric.startswith(key[:-1])]
    return metric[len(max(patterns, key=len)) - 1 :] if patterns else None


def _metric_position(task_metrics: tuple[str, ...], metric: str) -> int:
    return task_metrics.index(metric) if metric in task_metrics else len(task_metrics)


def _fmt(value: float | None) -> str:
    return "N/A" if value is None else f"{value:.4f}"


def samples_text(row: ScoreRow) -> str:
    """Items scored, with the test set's size and "partial" where a --limit cut it: "10 of 3,721 items, partial"."""
    count = "?" if row.samples is None else f"{row.samples:,}"
    if row.partial:
        of = f" of {row.samples_total:,}" if row.samples_total is not None else ""
        return f"{count}{of} items, partial"
    if row.samples is not None and row.samples_total is not None and row.samples_total != row.samples:
        return f"{count} of {row.samples_total:,}"
    return count


# Per-item bookkeeping the tasks emit as metrics, not scores: said in a note below the table, not as a row.
HELPER_METRICS = {"judge_computed": "share of items the judge panel was asked about"}

INTERVAL_NOTE = (
    "95% CI: Wilson score interval for proportions (means of per-item 0/1 values), normal approximation "
    "(value ± 1.96 × stderr, clipped to the metric's range) for other means"
)

SCRIPTED = "scripted"
SCRIPTED_NOTE = (
    "(scripted): a judge panel's number from scripted judges (the demo's fake judge server answers from a script, "
    "whatever the model wrote): it says nothing about the answers"
)


def metric_label(row: ScoreRow) -> str:
    """The row's metric as a reader sees it: its spec's label, "(scripted)" after a scripted judge's number."""
    label = metric_info(row.benchmark, row.metric).label
    return f"{label} ({SCRIPTED})" if row.scripted else label


def helper_notes(rows: list[ScoreRow]) -> list[str]:
    return [
        f"`{row.task}` {row.metric} = {_fmt(row.value)} ({HELPER_METRICS[row.metric]}; bookkeeping, not a score)"
        for row in rows
        if row.metric in HELPER_METRICS
    ]


def interval_text(row: ScoreRow) -> str:
    found = row.interval()
    return "–" if found is None else found.text()


def results_table(rows: list[ScoreRow]) -> str:
    header = "| Task | Version | Filter | n-shot | Metric | Value | ± Stderr | 95% CI | Samples |"
    lines = [header, "|---|---|---|---|---|---:|---:|---:|---:|"]
    filters = task_filters(rows)
    for row in rows:
        if row.metric in HELPER_METRICS:
            continue
        lines.append(
            f"| `{row.task}` | {row.version} | {filter_text(row, filters)} | {row.n_shot} | {metric_label(row)} "
            f"(`{row.metric}`) | {_fmt(row.value)} | {_fmt(row.stderr)} | {interval_text(row)} | {samples_text(row)} |"
        )
    return "\n".join(lines)


def headline_rows(rows: list[ScoreRow]) -> list[ScoreRow]:
    """The rows of the report's first table and the card (the spec's ``MetricInfo.headline``); bookkeeping out, a
    metric the same under every reading once."""
    return [
        r
        for r in once_across_readings(rows)
        if r.metric not in HELPER_METRICS and metric_info(r.benchmark, r.metric).headline
    ]


def diagnostic_rows(rows: list[ScoreRow]) -> list[ScoreRow]:
    """The rows of the report's "Diagnostics" table: every other metric but the bookkeeping (a note)."""
    return [
        r
        for r in once_across_readings(rows)
        if r.metric not in HELPER_METRICS and not metric_info(r.benchmark, r.metric).headline
    ]


# --------------------------------------------------------------------------- readings side by side


@dataclass(frozen=True)
class ReadingsTable:
    """Tasks read several ways (lm-eval filters, the spec's ``Reading``s), one row each: the spec's reading metrics
    under each reading side by side (the headline reading first), then the metrics the same under every reading."""

    columns: list[str]  # after Task, Version, n-shot; before Samples
    rows: list[tuple[ScoreRow, list[ScoreRow | None]]]  # (the task's headline row, a row or None per column)


def readings_tables(rows: list[ScoreRow]) -> list[ReadingsTable]:
    """One table per layout of columns (tasks with the same readings and metrics share one); [] where no task of
    ``rows`` has several filters."""
    from medeval_metrics.report.metric_info import reporting_for

    filters = task_filters(rows)
    by_key = {row.key: row for row in rows}
    tables: dict[tuple, ReadingsTable] = {}
    for task, names in filters.items():
        if len(names) < 2:
            continue
        task_rows = [r for r in rows if r.task == task]
        benchmark = task_rows[0].benchmark
        primary = primary_metric(benchmark, [r.metric for r in task_rows]) if benchmark else task_rows[0].metric
        listed = [m for m in reporting_for(benchmark).reading_metrics if any(r.metric == m for r in task_rows)]
        per_reading = [
            m
            for m in (listed or [primary])
            if not metric_info(benchmark, m).across_readings and any(r.metric == m for r in task_rows)
        ]
        across = [
            r.metric
            for r in once_across_readings(task_rows)
            if metric_info(benchmark, r.metric).across_readings and r.metric not in HELPER_METRICS
        ]
        headline = _headline_filter(task_rows[0], filters)
        cells = [(m, f) for m in per_reading for f in names] + [(m, headline) for m in dict.fromkeys(across)]
        columns = [
            f"{metric_info(benchmark, m).label}, {f}{headline_mark(benchmark, f)}"
            for m, f in cells[: len(per_reading) * len(names)]
        ] + [f"{metric_info(benchmark, m).label}, {EACH_READING}" for m in dict.fromkeys(across)]
        found = [by_key.get((task, m, f)) for m, f in cells]
        first = next((r for r in found if r is not None), task_rows[0])
        table = tables.setdefault(tuple(columns), ReadingsTable(columns, []))
        table.rows.append((first, found))
    return list(tables.values())


def _cell(row: ScoreRow | None) -> str:
    if row is None:
        return "–"
    stderr = "" if row.stderr is None else f" ± {row.stderr:.4f}"
    return f"{row.value:.4f}{stderr}"


def readings_markdown(rows: list[ScoreRow]) -> str:
    """The readings tables (``readings_tables``) in Markdown; "" where no task is read several ways."""
    parts = []
    for table in readings_tables(rows):
        lines = [
            "| Task | Version | n-shot | " + " | ".join(table.columns) + " | Samples |",
            "|---|---|---|" + "---:|" * (len(table.columns) + 1),
        ]
        for first, found in table.rows:
            cells = " | ".join(_cell(r) for r in found)
            lines.append(f"| `{first.task}` | {first.version} | {first.n_shot} | {cells} | {samples_text(first)} |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def readings_about(rows: list[ScoreRow]) -> list[str]:
    """One line per set of tasks read the same several ways: what each reading reads (the spec's words), the
    headline one named; said under the readings table."""
    from medeval_metrics.report.metric_info import reading_of

    filters = task_filters(rows)
    benchmark = {row.task: row.benchmark for row in rows}
    several: dict[tuple[str, tuple[str, ...]], list[str]] = {}  # one line per benchmark and set of readings
    for task, names in filters.items():
        if len(names) > 1:
            several.setdefault((benchmark[task], tuple(names)), []).append(task)
    lines = []
    for (_, names), tasks in several.items():
        first = next(r for r in rows if r.task == tasks[0])
        described = []
        for name in names:
            reading = reading_of(first.benchmark, name)
            if reading is None:  # a filter the spec does not describe (a task outside the pack): nothing to say
                continue
            described.append(
                f"`{name}`{headline_mark(first.benchmark, name)}, {reading.label}: {reading.about.rstrip('.')}."
            )
        if not described:
            continue
        lines.append(f"{', '.join(f'`{t}`' for t in tasks)}: " + " ".join(described))
    return lines


def readings_notes(rows: list[ScoreRow]) -> list[str]:
    """For a task read one way under a filter's former name (a run of an earlier task version): which reading that
    was."""
    from medeval_metrics.report.metric_info import reading_of

    former: dict[tuple[str, str], list[str]] = {}
    benchmark = {row.task: row.benchmark for row in rows}
    for task, names in task_filters(rows).items():
        reading = reading_of(benchmark[task], names[0]) if len(names) == 1 else None
        if reading is not None and names[0] != reading.filter:
            former.setdefault((names[0], reading.filter), []).append(task)
    return [
        f"{', '.join(f'`{t}`' for t in tasks)}: read one way, `{old}`: the name an earlier version of the task gave "
        f"its `{now}` reading (later versions report more readings beside it)"
        for (old, now), tasks in former.items()
    ]


# lm-eval sends the requests of every task of one request type to the model in one call
_REQUEST_TYPE = {"multiple_choice": "loglikelihood"}


def _request_type(run: Run, task: str) -> str:
    output_type = run.output_type(task) or "?"  # "?": a task whose model calls are unknown
    return _REQUEST_TYPE.get(output_type, output_type)


@dataclass(frozen=True)
class TaskTime:
    task: str
    own_s: float  # building its prompts, its filters (a judged task's judges) and scoring: timed per task
    judging_s: float
    model_s: float | None  # its model calls' time where it had them alone; None where shared with other tasks
    judge: dict[str, Any]


@dataclass(frozen=True)
class RunTimes:
    setup_s: float | None  # model built, data loaded: once for the run
    tasks: list[TaskTime]
    shared: list[tuple[tuple[str, ...], str, float]]  # (tasks, request type, their model calls' time)


def run_times(run: Run) -> RunTimes | None:
    """The run's times as ``medeval run`` recorded them (``lm_eval_compat.run_record``); None without the record.

    Each task's own steps are timed per task. lm-eval sends the requests of all tasks of one request type to the
    model together, and the record shares that call's time out by request count: a share is no measurement, so
    where several tasks share their model calls, the calls' time is given once, for them together."""
    record = run.results.get("medeval_run") or {}
    recorded = record.get("tasks") or {}
    if not recorded:
        return None
    by_type: dict[str, list[str]] = {}
    for task, entry in sorted(recorded.items()):
        if "model_s" in entry:
            by_type.setdefault(_request_type(run, task), []).append(task)
    shared_tasks = {t for tasks in by_type.values() if len(tasks) > 1 for t in tasks}
    times = []
    for task, entry in sorted(recorded.items()):
        parts = [entry.get(k) for k in ("prepare_s", "filters_s", "scoring_s") if k in entry]
        # a record without the parts (only a wall time): that time, as it was recorded
        own = float(sum(parts)) if parts or "model_s" in entry else float(entry.get("wall_s", 0.0))
        model = None if task in shared_tasks or "model_s" not in entry else float(entry["model_s"])
        times.append(TaskTime(task, own, float(entry.get("filters_s", 0.0)), model, entry.get("judge") or {}))
    shared = [
        (tuple(tasks), kind, float(sum(recorded[t]["model_s"] for t in tasks)))
        for kind, tasks in sorted(by_type.items())
        if len(tasks) > 1
    ]
    setup = record.get("setup_s")
    return RunTimes(float(setup) if _is_number(setup) else None, times, shared)


TIMES_NOTE = (
    "Own steps: building the task's prompts, its filters (a judged task's judges) and scoring, timed per task. "
    "Model: its model calls; lm-eval sends the requests of every task of one request type to the model together, "
    "so where tasks share them their time is given once, for those tasks together"
)


def _judge_cells(judge: dict[str, Any]) -> tuple[str, str]:
    if not judge:
        return "–", "–"
    tokens = (
        f"{judge.get('prompt_tokens', 0):,} + {judge.get('completion_tokens', 0):,}"
        if "prompt_tokens" in judge or "completion_tokens" in judge
        else "–"
    )
    return str(judge.get("requests", "–")), tokens


def run_time_table(run: Run) -> str:
    """Each task's own time, the model's time per task or once for tasks that share their model calls, the set-up
    once for the run, and a judged task's judge requests and tokens (``run_times``); "" without the record."""
    times = run_times(run)
    if times is None:
        return ""
    lines = []
    if times.setup_s is not None:
        lines += [f"Set-up, once for the run (model built, data loaded): {times.setup_s:.1f} s.", ""]
    lines += [
        "| Task | Own steps (s) | of which judging (s) | Model (s) | Judge requests | Judge tokens "
        "(prompt + completion) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for entry in times.tasks:
        requests, tokens = _judge_cells(entry.judge)
        model = "shared (below)" if entry.model_s is None else f"{entry.model_s:.1f}"
        lines.append(
            f"| `{entry.task}` | {entry.own_s:.1f} | {entry.judging_s:.1f} | {model} | {requests} | {tokens} |"
        )
    for tasks, kind, seconds in times.shared:
        names = ", ".join(f"`{t}`" for t in tasks)
        lines.append(f"| model calls of {names} together ({kind}) | | | {seconds:.1f} | | |")
    lines += ["", TIMES_NOTE + "."]
    return "\n".join(lines)


def settings_table(settings: dict[str, str]) -> str:
    lines = ["| Setting | Value |", "|---|---|"]
    lines += [f"| {name} | {value.replace('|', '/')} |" for name, value in settings.items()]
    return "\n".join(lines)


def comparison_rows(rows: list[ScoreRow]) -> list[ScoreRow]:
    """The rows a reader compares models by: the metrics the benchmark publishes in the model-index (none of a
    task outside the pack). Bookkeeping (items judged, per-judge success, id echoes), diagnostics and a user's
    own tasks stay in the report's results.md."""
    return [
        row
        for row in once_across_readings(rows)
        if row.in_pack and metric_info(row.benchmark, row.metric).in_model_index
    ]


def outside_note(rows: list[ScoreRow]) -> str:
    """Says which tasks are not the pack's: their numbers are lm-eval's, with no range the pack knows."""
    outside = sorted({row.task for row in rows if not row.in_pack})
    if not outside:
        return ""
    return (
        f"{', '.join(f'`{t}`' for t in outside)}: not a task of the pack (a suite of your own): scores as lm-eval "
        "gave them, under its metric names, not in the model-index"
    )


SYNTHETIC_NOTE = "the data is synthetic (the demo's: written for the pack, no patient or exam data)"
SCRIPTED_MODEL_NOTE = "the model is scripted (the demo's: answers from a table): its scores say nothing about a model"


def run_notes(run: Run, rows: list[ScoreRow]) -> list[str]:
    """What a reader must know to read the run's numbers: partial, scripted, synthetic, the intervals."""
    notes = []
    partial = sorted({r.task for r in rows if r.partial})
    if partial:
        notes.append(
            f"{', '.join(f'`{t}`' for t in partial)}: partial (--limit): scored on part of the test set, "
            "not comparable with full runs"
        )
    if any(r.scripted for r in rows):
        notes.append(SCRIPTED_NOTE)
    synthetic = sorted({r.task for r in rows if run.synthetic(r.task)})
    if synthetic:
        notes.append(f"{', '.join(f'`{t}`' for t in synthetic)}: {SYNTHETIC_NOTE}")
    if run.scripted_model:
        notes.append(SCRIPTED_MODEL_NOTE)
    notes += readings_notes(rows)
    if rows:
        notes.append(INTERVAL_NOTE)
    return notes


def run_section(run: Run, pack_version: str, heading: str = "###", card: bool = False) -> str:
    """A run's results: its headline table, its diagnostics table, run times and settings; ``card``: the headline
    table of the pack's tasks only (the diagnostics are in results.md)."""
    rows = score_rows(run)
    settings = {**run.settings(), "medeval-metrics version (report)": pack_version}
    headline = headline_rows(rows)
    shown = [r for r in headline if r.in_pack] if card else headline
    diagnostics = [] if card else diagnostic_rows(rows)
    parts = [f"{heading} {run.label}", ""]
    readings = readings_markdown([r for r in rows if r.in_pack] if card else rows)
    if readings:
        about = readings_about([r for r in rows if r.in_pack] if card else rows)
        parts += ["Readings side by side (each output read by each of the task's filters):", "", readings, ""]
        parts += [line for text in about for line in (text, "")]
    if shown or not diagnostics:
        parts += [results_table(shown) if shown else "_No medeval task in this run._", ""]
    if diagnostics:
        parts += ["Diagnostics:", "", results_table(diagnostics), ""]
    left = len({(r.task, r.metric) for r in rows}) - len({(r.task, r.metric) for r in shown})
    notes = run_notes(run, shown if card else rows)
    if not card:
        notes = helper_notes(rows) + [n for n in [outside_note(rows)] if n] + notes
    if card and left:
        notes.append(
            f"{left} bookkeeping and diagnostic metrics (e.g. items judged, per-judge success, reference-overlap "
            "scores) are in the report's results.md"
        )
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


NOT_RECORDED = "not recorded"


def task_settings_rows(runs: list[Run]) -> list[tuple[str, str, list[str]]]:
    """The tasks' own settings side by side (``Run.task_settings``, e.g. a retrieval task's retriever, k and mode):
    (task, setting, one text per run); "–" where a run did not evaluate the task, "not recorded" where it did
    without recording the setting (an earlier version's run)."""
    own = [run.task_settings() for run in runs]
    names = sorted({(task, name) for settings in own for task, found in settings.items() for name in found})
    rows = []
    for task, name in names:
        cells = [
            settings[task][name]
            if name in settings.get(task, {})
            else (NOT_RECORDED if task in run.results.get("results", {}) else "–")
            for run, settings in zip(runs, own)
        ]
        rows.append((task, name, cells))
    return rows


def task_settings_notes(runs: list[Run]) -> list[str]:
    """One line per task whose own settings differ between the runs that evaluated it: its scores were measured
    differently (another retriever, k or mode), not only by another model."""
    notes = []
    for task, name, cells in task_settings_rows(runs):
        if len({cell for cell in cells if cell != "–"}) > 1:
            notes.append(
                f"`{task}` was run with different {name} settings (settings per task, above): its scores are not "
                "comparable as if measured the same way"
            )
    return notes


def comparison_table(runs: list[Run]) -> str:
    """One row per (task, metric, filter), one column per run: value ± stderr (n); below it, the tasks' own settings
    side by side (``task_settings_rows``) and a note for each task run at different task versions or settings."""
    from medeval_metrics import registry
    from medeval_metrics.report.metric_info import reading_of

    def reading_name(row: ScoreRow) -> str:  # a filter under its former name shares its reading's line
        reading = reading_of(row.benchmark, row.filter)
        return reading.filter if reading else row.filter

    all_rows = [once_across_readings(score_rows(run)) for run in runs]
    per_run = [{(r.task, r.metric, reading_name(r)): r for r in rows} for rows in all_rows]
    found = {key: row for rows in reversed(per_run) for key, row in rows.items() if key[1] not in HELPER_METRICS}
    if not found:
        return "_No medeval task in these runs._"
    several = {task for rows in all_rows for task, names in task_filters(rows).items() if len(names) > 1}
    filters = task_filters([replace(row, filter=key[2]) for key, row in found.items()])

    def order(key: tuple[str, str, str]) -> tuple:
        row = found[key]
        metrics = registry.task(key[0]).metrics if row.in_pack else ()
        return (not row.in_pack, key[0], _metric_position(metrics, key[1]), filters[key[0]].index(key[2]), key)

    header = "| Task | Metric | Filter | " + " | ".join(run.label.replace("|", "/") for run in runs) + " |"
    lines = [header, "|---|---|---|" + "---:|" * len(runs)]
    for key in sorted(found, key=order):
        cells = []
        for rows in per_run:
            row = rows.get(key)
            if row is None:
                cells.append("–")
                continue
            count = f"n={samples_text(row)}" if row.partial else f"n={row.samples}"
            scripted = f", {SCRIPTED}" if row.scripted else ""
            named = f", as {row.filter}" if row.filter != key[2] else ""
            cells.append(f"{_fmt(row.value)} ± {_fmt(row.stderr)} ({count}{scripted}{named})")
        shown_filter = key[2]
        if key[0] in several:
            shown_filter = filter_text(replace(found[key], filter=key[2]), {key[0]: filters[key[0]] or [key[2]]})
        lines.append(f"| `{key[0]}` | {key[1]} | {shown_filter} | " + " | ".join(cells) + " |")
    own = task_settings_rows(runs)
    if own:
        lines += ["", "Settings per task that change its scores:", ""]
        lines += ["| Task | Setting | " + " | ".join(run.label.replace("|", "/") for run in runs) + " |"]
        lines += ["|---|---|" + "---|" * len(runs)]
        lines += [
            f"| `{task}` | {name} | " + " | ".join(cell.replace("|", "/") for cell in cells) + " |"
            for task, name, cells in own
        ]
    notes = version_notes(runs) + task_settings_notes(runs)
    if notes:
        lines += ["", "Notes: " + "; ".join(notes) + "."]
    return "\n".join(lines)


def _judge_stderr(cell: dict[str, Any]) -> str:
    return "N/A" if cell.get("stderr") is None or cell.get("n", 0) < 2 else f"{cell['stderr']:.3f}"


def judge_table(
    task: str, summary: dict[str, dict[str, dict[str, float]]], scripted: Callable[[str], bool] | None = None
) -> str:
    """Mean judge score per judge and dimension: ``summary[judge][dimension] = {value, stderr, n}``; a judge for
    which ``scripted(judge)`` holds is named "(scripted)"."""
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
        name = f"{judge} ({SCRIPTED})" if scripted is not None and scripted(judge) else judge
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
