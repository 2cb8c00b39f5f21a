"""Scores from a panel's verdicts: per item, and over items.

Conventions (facts about the peers, read from their released code: crfm-helm 0.5.16's
``LLMJuryMetric`` and MedARC's med-lm-envs judge environments; the judged task's README tabulates them):

- ``judge_panel_score``: HELM/MedHELM's jury score, the plain mean of all integer scores over the
  judges that scored the item x dimensions (1-5). ``judge_reward``: MedARC's reward, the mean over
  judges of the mean of dimension/scale_max (0-1). Both over the judges that scored the item; an
  item no judge scored contributes to neither and shows in ``judge_unscored_rate``.
- ``judge_panel_score_helm``: as HELM reports it, an item no judge scored counting as 1.0 (the
  scale minimum). ``judge_reward_medarc``: as MedARC reports it: a judge whose request failed is
  left out, a judge whose reply was unusable counts with MedARC's lenient reading of that reply
  (last JSON object, each dimension's "score" as a number clamped to 0-scale_max, missing = 0),
  and an item with no judge left is 0.0.
- Agreement is Krippendorff's alpha with the ordinal metric, over units = (item, dimension) and
  coders = judges, unscored verdicts being missing values. lm-eval has no standard error for it
  ("N/A" in its table); ``agreement_stderr`` gives a bootstrap one, used by ``medeval judge`` and by the
  report, from the per-item ratings the samples log.
- Per-judge success (the share of items a judge scored) has no metric of its own, whose name would
  depend on the panel: it is read from the per-item ``judge_verdicts`` (``success_by_judge``) by the
  report and by ``medeval run``'s exit code.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

SUCCESS_PREFIX = "judge_success_"  # the report's per-judge rows: judge_success_<judge> (``success_by_judge``)


def medarc_lenient_reward(reply: str | None, dimensions: Sequence[str], scale_max: int) -> float:
    """MedARC's reading of a reply the pack found unusable: see the module docstring."""
    from medeval_metrics.judge.verdict import _json_objects, _strip_think

    objects = [o for o in _json_objects(_strip_think(str(reply or ""))) if isinstance(o, dict)]
    if not objects:
        return 0.0
    verdict = objects[-1]
    total = 0.0
    for dim in dimensions:
        entry = verdict.get(dim)
        raw = entry.get("score") if isinstance(entry, dict) else None
        try:
            value = float(raw) if raw is not None and not isinstance(raw, bool) else None
        except (TypeError, ValueError):
            value = None
        if value is not None and math.isfinite(value):
            total += max(0.0, min(float(scale_max), value)) / scale_max
    return max(0.0, min(1.0, total / len(dimensions)))


def item_metrics(
    verdicts: Mapping[str, Mapping[str, Any]],
    dimensions: Sequence[str],
    judge_names: Sequence[str],
    scale_max: int = 5,
    scale_min: int = 1,
) -> dict[str, Any]:
    """Per-item values for lm-eval's ``process_results``.

    Keys with no meaning for this item (a dimension no judge scored) are left out rather than
    given a number: lm-eval then aggregates each metric over the items that produced it.
    """
    scored = [verdicts[name] for name in judge_names if (verdicts.get(name) or {}).get("scores")]
    out: dict[str, Any] = {"judge_unscored_rate": 1.0 - len(scored) / len(judge_names)}

    def score(name: str, dim: str) -> int | None:
        scores = (verdicts.get(name) or {}).get("scores")
        return scores[dim] if scores else None

    if len(judge_names) >= 2:
        # ratings for agreement: one row per dimension, one value per judge (None = unscored)
        out["judge_agreement"] = tuple(tuple(score(name, dim) for name in judge_names) for dim in dimensions)
    if scored:
        for dim in dimensions:
            out[f"judge_{dim}"] = sum(v["scores"][dim] for v in scored) / len(scored)
        out["judge_panel_score"] = sum(v["scores"][d] for v in scored for d in dimensions) / (
            len(scored) * len(dimensions)
        )
        out["judge_reward"] = sum(
            sum(v["scores"][d] / scale_max for d in dimensions) / len(dimensions) for v in scored
        ) / len(scored)
        echoed = [bool(v["id_echoed"]) for v in scored if v.get("id_echoed") is not None]
        if echoed:
            out["judge_id_echo_rate"] = sum(echoed) / len(echoed)
    out["judge_panel_score_helm"] = out.get("judge_panel_score", float(scale_min))
    medarc = []
    for name in judge_names:
        verdict = verdicts.get(name) or {}
        if verdict.get("scores"):
            medarc.append(sum(verdict["scores"][d] / scale_max for d in dimensions) / len(dimensions))
        elif verdict.get("unscored_kind") == "unusable":
            medarc.append(medarc_lenient_reward(verdict.get("reply"), dimensions, scale_max))
    out["judge_reward_medarc"] = sum(medarc) / len(medarc) if medarc else 0.0
    return out


def structured_verdicts(verdicts: Mapping[str, Mapping[str, Any]], judge_names: Sequence[str]) -> dict[str, Any]:
    """The per-item ``judge_verdicts`` field (logged with the samples as JSON, read by the report)."""
    return {
        name: {
            "scores": (verdicts.get(name) or {}).get("scores"),
            "unscored_reason": (verdicts.get(name) or {}).get("unscored_reason"),
            "id_echoed": (verdicts.get(name) or {}).get("id_echoed"),
        }
        for name in judge_names
    }


def _as_verdicts(value: Any) -> Mapping[str, Any] | None:
    """A logged ``judge_verdicts`` value (an object, or JSON text of one), else None."""
    if isinstance(value, str):
        import json

        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, Mapping) else None


def success_by_judge(items: Sequence[Any]) -> dict[str, dict[str, float]]:
    """Per judge, over the items of ``items`` (``judge_verdicts`` values, as ``structured_verdicts`` makes them or as
    the samples log them): ``{"value": share of the items it scored, "stderr", "n": items, "scored": count}``,
    the mean and standard error of a per-item 1.0 (scored) / 0.0, as lm-eval's ``mean`` would give them."""
    from medeval_metrics.stats import mean_and_stderr

    per_judge: dict[str, list[float]] = {}
    for item in items:
        verdicts = _as_verdicts(item)
        for name, verdict in (verdicts or {}).items():
            scored = isinstance(verdict, Mapping) and bool(verdict.get("scores"))
            per_judge.setdefault(str(name), []).append(1.0 if scored else 0.0)
    out = {}
    for name, values in per_judge.items():
        value, stderr = mean_and_stderr(values)
        out[name] = {"value": value, "stderr": stderr, "n": len(values), "scored": int(sum(values))}
    return out


def judged_share(items: Sequence[Mapping[str, Any]]) -> float:
    """lm-eval aggregation of ``judge_verdicts``: the share of items at least one judge scored."""
    if not items:
        return float("nan")
    return sum(1.0 for item in items if any((v or {}).get("scores") for v in item.values())) / len(items)


def krippendorff_alpha_ordinal(units: Sequence[Sequence[Any]]) -> float:
    """Krippendorff's alpha, ordinal metric. ``units``: one sequence of coder values per unit,
    ``None`` for missing. Units with fewer than two values are not pairable and are skipped.
    Returns NaN when there is no variation at all (alpha is undefined)."""
    pairable = [[v for v in unit if v is not None] for unit in units]
    pairable = [unit for unit in pairable if len(unit) >= 2]
    values = sorted({v for unit in pairable for v in unit})
    if not values:
        return float("nan")
    position = {v: i for i, v in enumerate(values)}
    size = len(values)
    coincidence = [[0.0] * size for _ in range(size)]
    for unit in pairable:
        weight = 1.0 / (len(unit) - 1)
        for i, a in enumerate(unit):
            for j, b in enumerate(unit):
                if i != j:
                    coincidence[position[a]][position[b]] += weight
    marginals = [sum(row) for row in coincidence]
    total = sum(marginals)

    def delta_squared(c: int, k: int) -> float:
        low, high = min(c, k), max(c, k)
        return (sum(marginals[low : high + 1]) - (marginals[low] + marginals[high]) / 2.0) ** 2

    observed = sum(coincidence[c][k] * delta_squared(c, k) for c in range(size) for k in range(size))
    expected = sum(marginals[c] * marginals[k] * delta_squared(c, k) for c in range(size) for k in range(size))
    if expected == 0:
        return float("nan")
    return 1.0 - (total - 1.0) * observed / expected


def agreement(items: Sequence[Sequence[Sequence[Any]]]) -> float:
    """lm-eval aggregation: per item, its rows of (judge values) per dimension."""
    return krippendorff_alpha_ordinal([row for item in items for row in item])


def agreement_stderr(items: Sequence[Sequence[Sequence[Any]]], resamples: int = 500, seed: int = 1234) -> float:
    """Bootstrap standard error of ``agreement``, resampling items (their dimensions stay together)."""
    # Canonical order first: a data-parallel run hands the items over rank by rank, and the seeded
    # resampling must draw the same items as in a single process.
    items = sorted(items, key=repr)
    if len(items) < 2:
        return 0.0
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        value = agreement([items[rng.randrange(len(items))] for _ in items])
        if not math.isnan(value):
            draws.append(value)
    if len(draws) < 2:
        return float("nan")
    mean = sum(draws) / len(draws)
    return math.sqrt(sum((d - mean) ** 2 for d in draws) / (len(draws) - 1))


def _or_na(value: float) -> float | str:
    return "N/A" if math.isnan(value) else value


def agreement_or_na(items: Sequence[Sequence[Sequence[Any]]]) -> float | str:
    """The task's aggregation: ``agreement``, or "N/A" where alpha is undefined (no pairable scores, no
    variation), as lm-eval writes a statistic without a value: its results file then holds no NaN,
    which strict JSON readers refuse."""
    return _or_na(agreement(items))


def summarise(per_item: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Over items: ``{metric: {"value", "stderr", "n"}}`` for every per-item metric (used by ``medeval judge``)."""
    from medeval_metrics.stats import mean_and_stderr

    out: dict[str, dict[str, float]] = {}
    keys = sorted({k for row in per_item for k in row})
    for key in keys:
        values = [row[key] for row in per_item if key in row]
        if key == "judge_agreement":
            out[key] = {"value": agreement(values), "stderr": agreement_stderr(values), "n": len(values)}
        elif key == "judge_verdicts":
            out[key] = {"value": judged_share(values), "stderr": float("nan"), "n": len(values)}
        elif values and all(isinstance(v, (int, float)) for v in values):
            value, stderr = mean_and_stderr(values)
            out[key] = {"value": value, "stderr": stderr, "n": len(values)}
    return out
