"""The model card's ``model-index``: the pack's results in the Hub's schema.

Entries are keyed by (task, dataset, split, metric, model): each task variant is its own named
result (a data set's CoT and multiple-choice variants never share one), and a metric is restated
in place rather than added again, so running the same report any number of times leaves the card
byte-identical. (huggingface_hub's ``eval_results_to_model_index`` groups results by dataset
alone, which folds every variant of a data set into the first variant's name, so the pack
serialises the index itself in the Hub's schema.) The card file's edit is ``report.card_yaml``.

A partial ``--limit`` run (published with ``--include-partial-runs``) says so in its dataset's name, the one the
Hub shows: "Benchmark (task) (10 of 3,721 items, partial)". The name is free text in the Hub's schema and no
part of an entry's key, so a later full run of the task replaces the entry, name and all.
"""

from __future__ import annotations

from typing import Any

from medeval_metrics.report.metric_info import metric_info, reporting_for
from medeval_metrics.report.runs import Run
from medeval_metrics.report.tables import (
    ScoreRow,
    metric_label,
    once_across_readings,
    samples_text,
    score_rows,
    task_filters,
)

DEFAULT_SOURCE_NAME = "lm-evaluation-harness with medeval-metrics"
DEFAULT_SOURCE_URL = "https://github.com/EleutherAI/lm-evaluation-harness"


def _dataset_of(task: str) -> tuple[str, str, str | None]:
    """(dataset type, dataset name, split) for a pack task, from its benchmark's spec."""
    from medeval_metrics import registry

    entry, benchmark = registry.task(task), registry.benchmark_of(task)
    source = benchmark.source(entry.source)
    display = reporting_for(benchmark.name).display_name or benchmark.name
    if source.hub:
        # the split as the Hub copy names it (where a whole set is published as one Hub split)
        return source.hub, f"{display} ({task})", source.hub_split or entry.split
    # A set with no public copy (e.g. a private set): name it so it cannot pass for a Hub dataset.
    return f"medeval/{entry.source.removesuffix('_path')}", f"{display} ({task}, the evaluator's own copy)", entry.split


def eval_results(
    rows: list[ScoreRow],
    source_name: str = DEFAULT_SOURCE_NAME,
    source_url: str = DEFAULT_SOURCE_URL,
    task_settings: dict[str, dict[str, str]] | None = None,
):
    """``huggingface_hub.EvalResult`` per reportable metric row. ``task_settings``: each task's own settings that
    change its scores (``Run.task_settings``: how a retrieval task retrieved), published in its dataset args."""
    from huggingface_hub import EvalResult

    out = []
    filters = task_filters(rows)
    for row in once_across_readings(rows):  # a metric the same under every reading: once, under the headline one
        info = metric_info(row.benchmark, row.metric)
        if not row.in_pack or not info.in_model_index:  # a user's own task: no dataset id or range the pack knows
            continue
        name = metric_label(row)  # "(scripted)" after a scripted judge's number
        if len(filters[row.task]) > 1 and not info.across_readings:  # the Hub shows names: the reading in it
            name = f"{name} ({row.filter})"
        dataset_type, dataset_name, split = _dataset_of(row.task)
        if row.partial:  # a --limit run: said in the name the Hub shows (free text in its schema; not in the key)
            dataset_name = f"{dataset_name} ({samples_text(row)})"
        out.append(
            EvalResult(
                task_type=reporting_for(row.benchmark).task_type,
                task_name=row.task,
                dataset_type=dataset_type,
                dataset_name=dataset_name,
                dataset_split=split,
                # the Hub's convention for few-shot counts (as on the Open LLM Leaderboard cards)
                dataset_args={
                    **({"num_few_shot": row.n_shot} if isinstance(row.n_shot, int) else {}),
                    **(task_settings or {}).get(row.task, {}),  # e.g. "retrieval": "retriever: external: ...; k: 4"
                }
                or None,
                metric_type=info.hub_type,
                metric_name=name,
                metric_config=None if row.filter == "none" else row.filter,
                metric_value=round(row.value, 6),
                source_name=source_name,
                source_url=source_url,
            )
        )
    return out


def _eval_result_key(result) -> tuple:
    return (
        result.task_name,
        result.dataset_type,
        result.dataset_config,
        result.dataset_split,
        result.metric_type,
        result.metric_name,
        result.metric_config,
    )


def former_configs(task: Any, metric_config: Any) -> tuple[str, ...]:
    """The filter names an earlier version of the pack's ``task`` gave the reading ``metric_config`` (its spec's
    ``Reading.former_filters``): an entry of the task under one of them is the same reading of an older run, and a
    newer entry under the reading's name replaces it."""
    from medeval_metrics import registry
    from medeval_metrics.report.metric_info import reading_of

    spec = registry.benchmark_of(task) if isinstance(task, str) else None
    reading = reading_of(spec.name, metric_config) if spec and isinstance(metric_config, str) else None
    return reading.former_filters if reading is not None and reading.filter == metric_config else ()


def _superseded(existing: list, new: list, task_of, type_of, config_of) -> set[int]:
    """Positions in ``existing`` of entries that an entry of ``new`` supersedes under a former filter name: same
    task and metric type, config a former name of the new entry's reading."""
    renamed = {(task_of(r), type_of(r), old) for r in new for old in former_configs(task_of(r), config_of(r))}
    return {i for i, r in enumerate(existing) if (task_of(r), type_of(r), config_of(r)) in renamed}


def merge_eval_results(existing: list, new: list) -> list:
    """``existing`` with every entry that ``new`` restates (same task, dataset, split, metric) replaced in place,
    then the rest of ``new``; an entry under a filter's former name (``former_configs``) goes where ``new`` has the
    task's metric under the reading's name."""
    gone = _superseded(existing, new, lambda r: r.task_name, lambda r: r.metric_type, lambda r: r.metric_config)
    merged = [r for i, r in enumerate(existing) if i not in gone]
    positions = {_eval_result_key(r): i for i, r in enumerate(merged)}
    for result in new:
        key = _eval_result_key(result)
        if key in positions:
            merged[positions[key]] = result
        else:
            positions[key] = len(merged)
            merged.append(result)
    return merged


def runs_eval_results(runs: list[Run], **source: str) -> list:
    """Eval results of several runs of one model; a later run's value replaces an earlier one's."""
    merged: list = []
    for run in runs:
        merged = merge_eval_results(merged, eval_results(score_rows(run), **source, task_settings=run.task_settings()))
    return merged


# --------------------------------------------------------------------------- the Hub's schema, one result per task


def _without_none(mapping: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mapping.items() if v is not None}


def result_key(result: dict[str, Any]) -> tuple:
    """(task, dataset, config, split) of a model-index result dict: one result per task variant."""
    task, dataset = result.get("task") or {}, result.get("dataset") or {}
    return (task.get("name"), dataset.get("type"), dataset.get("config"), dataset.get("split"))


def metric_key(metric: dict[str, Any]) -> tuple:
    return (metric.get("type"), metric.get("name"), metric.get("config"))


def index_results(results: list) -> list[dict[str, Any]]:
    """EvalResults as model-index result dicts: one per (task, dataset, split), metrics in order."""
    grouped: dict[tuple, dict[str, Any]] = {}
    for r in results:
        entry = {
            "task": _without_none({"type": r.task_type, "name": r.task_name}),
            "dataset": _without_none(
                {
                    "name": r.dataset_name,
                    "type": r.dataset_type,
                    "config": r.dataset_config,
                    "split": r.dataset_split,
                    "revision": r.dataset_revision,
                    "args": r.dataset_args,
                }
            ),
            "metrics": [],
        }
        if r.source_url is not None:
            entry["source"] = _without_none({"url": r.source_url, "name": r.source_name})
        result = grouped.setdefault(result_key(entry), entry)
        metric = _without_none(
            {
                "type": r.metric_type,
                "value": r.metric_value,
                "name": r.metric_name,
                "config": r.metric_config,
                "args": r.metric_args,
                "verified": r.verified or None,
                "verifyToken": r.verify_token,
            }
        )
        _merge_metrics(result["metrics"], [metric])
    return list(grouped.values())


def _merge_metrics(existing: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """Merge ``new`` into ``existing`` in place by metric key (a restated metric replaces the first copy)."""
    for metric in new:
        for index, old in enumerate(existing):
            if isinstance(old, dict) and metric_key(old) == metric_key(metric):
                existing[index] = metric
                break
        else:
            existing.append(metric)


def _merge_result(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The pack's new result over its earlier one: new metrics replace theirs, earlier-only metrics stay once (but
    for those under a filter's former name where the new result has the reading: ``former_configs``)."""
    metrics: list[dict[str, Any]] = []
    seen = set()
    task = (new.get("task") or {}).get("name")
    olds = [m for m in old.get("metrics") or [] if isinstance(m, dict)]
    gone = _superseded(olds, new["metrics"], lambda _: task, lambda m: m.get("type"), lambda m: m.get("config"))
    for metric in [m for i, m in enumerate(olds) if i not in gone]:
        if isinstance(metric, dict) and metric_key(metric) not in seen:  # copies left by older pack versions go
            seen.add(metric_key(metric))
            metrics.append(metric)
    _merge_metrics(metrics, new["metrics"])
    return {**new, "metrics": metrics}


def model_index(model_name: str, results: list) -> list[dict[str, Any]]:
    return [{"name": model_name, "results": index_results(results)}]


def _dump(data: Any) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000)


def model_index_yaml(model_name: str, results: list) -> str:
    return _dump({"model-index": model_index(model_name, results)}) + "\n"
