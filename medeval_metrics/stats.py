"""Small statistics shared by the pack: means with the same standard error lm-eval reports, and the 95% interval
of a mean (Wilson's for a proportion, the normal approximation otherwise)."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any


def mean_and_stderr(values: Iterable[float], order_free: bool = False) -> tuple[float, float]:
    """Mean and standard error of the mean (sample sd with n-1, over sqrt(n)), as lm-eval's ``mean``.

    With ``order_free`` the sums are exactly rounded (math.fsum), so the result does not depend on
    the order of the values; without it, they are plain float sums, bit-identical to lm-eval's own.
    One value has no spread to measure: its stderr is reported as 0.0, never "N/A".
    """
    total = math.fsum if order_free else sum
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("mean_and_stderr needs at least one value")
    n = len(xs)
    mean = total(xs) / n
    if n == 1:
        return mean, 0.0
    variance = total((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(variance / n)


def bootstrap_stderr(
    items: Sequence[Any], statistic: Callable[[list[Any]], float], iterations: int = 1000, seed: int = 1234
) -> float:
    """Standard error of ``statistic`` by a seeded bootstrap: ``iterations`` resamples of the items, with
    replacement (sample sd with n-1 over the resampled values). Fewer than two items: 0.0. Same result every run.
    """
    items = list(items)
    if len(items) < 2:
        return 0.0
    rng = random.Random(seed)
    size = len(items)
    values = [statistic([items[rng.randrange(size)] for _ in range(size)]) for _ in range(iterations)]
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


def normal_ci(mean: float, stderr: float, z: float = 1.959963984540054) -> tuple[float, float]:
    """A two-sided normal-approximation confidence interval (95% by default)."""
    return mean - z * stderr, mean + z * stderr


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """The Wilson score interval (95% by default) of a proportion: ``successes`` items of ``n`` at 1.

    Unlike the normal approximation it does not collapse to a point at 0 or 1 of n, nor for one item:
    2 of 2 gives (0.342, 1), 0 of 2 gives (0, 0.658). Centre (p + z^2/2n) / (1 + z^2/n), half-width
    z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2); the ends are exact 0 and 1 at 0 and n of n.
    """
    if not isinstance(n, int) or n < 1 or not 0 <= successes <= n:
        raise ValueError(f"wilson_interval needs 0 <= successes <= n and n >= 1 (got {successes} of {n})")
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


# --------------------------------------------------------------------------- the interval of a mean, by its kind
# A proportion (a mean of per-item 0/1 values) gets Wilson's interval, which stays an interval at 0 or n of n and for
# one item; any other mean the normal approximation (clipped to the metric's range), none without a stderr.

WILSON = "Wilson"
NORMAL = "normal"


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    method: str  # WILSON or NORMAL

    def text(self, digits: int = 3) -> str:
        return f"{self.low:.{digits}f}–{self.high:.{digits}f} ({self.method})"


def successes(value: float, n: int | None) -> int | None:
    """The count of 1s behind a proportion ``value`` of ``n`` items; None where it is not a whole count (the
    mean is over other items than these ``n``)."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1 or not math.isfinite(value):
        return None
    count = round(value * n)
    return count if abs(value * n - count) <= 1e-6 * max(1, n) and 0 <= count <= n else None


def interval(
    value: float,
    stderr: float | None,
    n: int | None,
    proportion: bool,
    bounds: tuple[float, float] | None = None,
) -> Interval | None:
    """The 95% interval of a mean: Wilson's for a proportion of ``n`` items, else the normal approximation
    (clipped to ``bounds``); None where neither can be had (no stderr, and no whole count of items)."""
    if proportion:
        count = successes(value, n)
        if count is not None:
            return Interval(*wilson_interval(count, n), WILSON)  # type: ignore[arg-type]
    if stderr is None or not math.isfinite(stderr):
        return None
    low, high = normal_ci(value, stderr)
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Interval(low, high, NORMAL)


def all_zero_or_one(values: Iterable[Any]) -> bool:
    """Every value a number 0 or 1 (and at least one): the per-item values of a proportion."""
    seen = False
    for value in values:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value not in (0, 1):
            return False
        seen = True
    return seen
