"""emrQA test sets: a seeded sample stratified by logical-form template, streamed from the prepared split."""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from medeval_metrics.emrqa.seeding import stable_fraction
from medeval_metrics.errors import MedevalDataError
from medeval_metrics.settings import excerpt, setting

DEFAULT_SAMPLE_SIZE = 1000


def allocate(counts: Mapping[str, int], size: int) -> dict[str, int]:
    """How many items to draw per stratum: proportional, at least one each while size allows."""
    total = sum(counts.values())
    if size <= 0 or size >= total:
        return dict(counts)
    names = sorted(counts)
    alloc = {n: 0 for n in names}
    if size >= len(names):
        alloc = {n: min(1, counts[n]) for n in names}
    remaining = size - sum(alloc.values())
    shares = {n: remaining * counts[n] / total for n in names}
    for n in names:
        alloc[n] += min(int(shares[n]), counts[n] - alloc[n])
    leftover = size - sum(alloc.values())
    order = sorted(names, key=lambda n: (-(shares[n] - int(shares[n])), n))
    while leftover > 0:
        progressed = False
        for n in order:
            if leftover and alloc[n] < counts[n]:
                alloc[n] += 1
                leftover -= 1
                progressed = True
        if not progressed:
            break
    return alloc


def stratified_sample(
    path: Path, counts: Mapping[str, int], size: int, seed: int, kind: str, id_field: str
) -> list[dict[str, Any]]:
    """A seeded sample stratified by ``lf_template``, streamed from a JSONL file, in file order."""
    alloc = allocate(counts, size)
    heaps: dict[str, list[tuple[float, int, dict[str, Any]]]] = {}
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            record = json.loads(line)
            quota = alloc.get(record["lf_template"], 0)
            if quota <= 0:
                continue
            rank = stable_fraction(seed, "sample", kind, record[id_field])
            heap = heaps.setdefault(record["lf_template"], [])
            item = (-rank, number, record)
            if len(heap) < quota:
                heapq.heappush(heap, item)
            elif item[0] > heap[0][0]:
                heapq.heapreplace(heap, item)
    chosen = [(number, record) for heap in heaps.values() for _, number, record in heap]
    return [record for _, record in sorted(chosen, key=lambda pair: pair[0])]


def sample_size(kwargs: Mapping[str, Any]) -> int:
    value = setting(kwargs, "emrqa_sample_size", DEFAULT_SAMPLE_SIZE)
    if str(value).strip().lower() in {"all", "full", "0"}:
        return 0
    try:
        size = int(value)
    except (TypeError, ValueError):
        raise MedevalDataError(
            f"emrqa_sample_size is {excerpt(value)}: give a positive number of test questions, or 'all' for the full "
            "split."
        ) from None
    if size < 0:
        raise MedevalDataError(f"emrqa_sample_size is {size}: give a positive number, or 'all'.")
    return size
