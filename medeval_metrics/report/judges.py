"""Judge scores in logged samples (a judged task's LLM-judge panel), summarised per judge and dimension.

The sample field read here (the contract with the judged tasks):

    "judge_scores": {"<judge name>": {"<dimension>": <number or null>, ...}, ...}

a top-level key of each record of ``samples_<task>_<date>.jsonl``, as a JSON object or as a string
holding one. A judged task gets it there by returning ``judge_scores`` from ``process_results``
(listed in ``metric_list`` with an aggregation of its own, e.g. a panel-agreement statistic), which
lm-eval logs per sample. ``null`` means the judge gave no usable score; it is counted apart, never
as a score.

What the judged tasks log (task version 2 on): ``judge_verdicts``, a JSON object per sample,
``{"<judge>": {"scores": {dimension: int} or null, "unscored_reason": str or null, "id_echoed": bool
or null}}``, returned by ``process_results`` (``judge.aggregate.structured_verdicts``). Also read:
the records of ``judged_<task>_<time>.jsonl`` written by ``medeval judge`` (``verdicts`` at the top),
and, for sample logs written before task version 2 only, the judge filter's record as lm-eval
logged it in ``filtered_resps[0]`` (a Python ``repr``, hence the one ``literal_eval`` left here).

Figures lm-eval does not give, computed here from the same records (``sample_statistics``): each
judge's success rate, ``judge_success_<judge>`` (no metric of a task: its name would come from the
panel at run time; earlier task versions had it), and a standard error for the panel's agreement,
which lm-eval reports as "N/A" (a corpus statistic).
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Iterable
from typing import Any

from medeval_metrics.stats import mean_and_stderr

JUDGE_FIELD = "judge_scores"


def _from_filter_record(sample: dict[str, Any]) -> dict[str, Any] | None:
    """``{judge: {dimension: score}}`` from a logged judge-filter record (or a ``medeval judge``
    verdict record, which has ``verdicts`` at the top level), if the sample holds one."""
    responses = sample.get("filtered_resps")
    first = responses[0] if isinstance(responses, list) and responses else responses
    if isinstance(sample.get("verdicts"), dict):
        first = sample
    if isinstance(first, str):
        if not (first.startswith("{") and "verdicts" in first):
            return None
        try:
            first = ast.literal_eval(first)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(first, dict) or not isinstance(first.get("verdicts"), dict):
        return None
    verdicts = first["verdicts"]
    dimensions = sorted(
        {d for v in verdicts.values() if isinstance(v, dict) and isinstance(v.get("scores"), dict) for d in v["scores"]}
    )
    out = {}
    for judge, verdict in verdicts.items():
        scores = verdict.get("scores") if isinstance(verdict, dict) else None
        out[judge] = {d: (scores or {}).get(d) for d in dimensions}
    return out


VERDICTS_FIELD = "judge_verdicts"


def _from_structured(verdicts: Any) -> dict[str, Any] | None:
    if isinstance(verdicts, str):
        try:
            verdicts = json.loads(verdicts)
        except json.JSONDecodeError:
            return None
    if not isinstance(verdicts, dict):
        return None
    dimensions = sorted(
        {d for v in verdicts.values() if isinstance(v, dict) and isinstance(v.get("scores"), dict) for d in v["scores"]}
    )
    return {
        judge: {d: ((v.get("scores") or {}) if isinstance(v, dict) else {}).get(d) for d in dimensions}
        for judge, v in verdicts.items()
    }


def judge_scores_of(sample: dict[str, Any], finite_only: bool = True) -> dict[str, dict[str, float | None]] | None:
    """The judge scores of one logged sample, or None if it has none (or a malformed one). A score that is not a
    number is no usable score (None); so is one that is not finite, unless ``finite_only`` is off
    (``tables.sample_problems`` lists those: NaN or Infinity come from an edited file, not from a judge's reply)."""
    value = sample.get(JUDGE_FIELD)
    if value is None and sample.get(VERDICTS_FIELD) is not None:
        value = _from_structured(sample[VERDICTS_FIELD])
    if value is None:
        value = _from_filter_record(sample)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    if not isinstance(value, dict):
        return None
    out: dict[str, dict[str, float | None]] = {}
    for judge, dims in value.items():
        if isinstance(dims, dict):
            out[str(judge)] = {
                str(d): (
                    float(s)
                    if isinstance(s, (int, float)) and not isinstance(s, bool) and (math.isfinite(s) or not finite_only)
                    else None
                )
                for d, s in dims.items()
            }
    return out or None


def collect_judge_scores(samples: Iterable[dict[str, Any]]) -> dict[str, dict[str, list[float | None]]]:
    """``{judge: {dimension: [score or None per sample]}}`` over samples that carry judge scores."""
    collected: dict[str, dict[str, list[float | None]]] = {}
    for sample in samples:
        scores = judge_scores_of(sample)
        for judge, dims in (scores or {}).items():
            for dimension, score in dims.items():
                collected.setdefault(judge, {}).setdefault(dimension, []).append(score)
    return collected


def scores_by_judge_and_dimension(
    collected: dict[str, dict[str, list[float | None]]],
) -> dict[str, dict[str, dict[str, float]]]:
    """Per judge and dimension: mean and stderr of the scores given, ``n`` scored, ``missing`` unscored."""
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for judge, dims in collected.items():
        for dimension, scores in dims.items():
            given = [s for s in scores if s is not None]
            if not given:
                continue
            value, stderr = mean_and_stderr(given)
            summary.setdefault(judge, {})[dimension] = {
                "value": value,
                "stderr": stderr,
                "n": len(given),
                "missing": len(scores) - len(given),
            }
    return summary


def verdicts_of(sample: dict[str, Any]) -> dict[str, Any] | None:
    """``{judge: verdict}`` of one logged sample or ``medeval judge`` record (each verdict with its ``scores``,
    None where unscored), or None where it has none."""
    value = sample.get(VERDICTS_FIELD)
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            value = None
    if isinstance(value, dict):
        return value
    if isinstance(sample.get("verdicts"), dict):  # a medeval judge record
        return sample["verdicts"]
    responses = sample.get("filtered_resps")
    first = responses[0] if isinstance(responses, list) and responses else responses
    if isinstance(first, str) and first.startswith("{") and "verdicts" in first:  # before task version 2
        try:
            first = ast.literal_eval(first)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return first["verdicts"] if isinstance(first, dict) and isinstance(first.get("verdicts"), dict) else None


def _ratings(value: Any) -> tuple[tuple[Any, ...], ...] | None:
    """A logged ``judge_agreement`` value (rows of judge scores, JSON lists) as the tuples the task scored."""
    if not isinstance(value, list) or not all(isinstance(row, list) for row in value):
        return None
    return tuple(tuple(row) for row in value)


def sample_statistics(
    samples: list[dict[str, Any]], default_filter: str = "none"
) -> dict[tuple[str, str], dict[str, float]]:
    """``{(metric, filter): {"value", "stderr", "n"}}`` from a judged task's logged samples (or ``medeval
    judge``'s records, which name no filter: ``default_filter``): ``judge_success_<judge>`` per judge, as the
    task's metric of that name gave it (the mean of a per-item 1/0 and lm-eval's standard error of it), and the
    bootstrap standard error of ``judge_agreement`` (``judge.aggregate.agreement_stderr``) with its value."""
    from medeval_metrics.judge.aggregate import SUCCESS_PREFIX, agreement, agreement_stderr, success_by_judge

    by_filter: dict[str, list[dict[str, Any]]] = {}
    for sample in samples:
        by_filter.setdefault(str(sample.get("filter") or default_filter), []).append(sample)
    out: dict[tuple[str, str], dict[str, float]] = {}
    for filter_name, rows in by_filter.items():
        verdicts = [v for v in map(verdicts_of, rows) if v is not None]
        for judge, stats in success_by_judge(verdicts).items():
            # one item has no spread: "N/A", as lm-eval writes it
            stderr = stats["stderr"] if stats["n"] > 1 else None
            out[(SUCCESS_PREFIX + judge, filter_name)] = {"value": stats["value"], "stderr": stderr, "n": stats["n"]}
        ratings = [r for r in (_ratings(row.get("judge_agreement")) for row in rows) if r is not None]
        if ratings:
            value, stderr = agreement(ratings), agreement_stderr(ratings)
            out[("judge_agreement", filter_name)] = {
                "value": value,
                "stderr": None if math.isnan(stderr) else stderr,
                "n": len(ratings),
            }
    return out
