"""Small statistics shared by the pack: means with the same standard error lm-eval reports."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

Aggregation = TypeVar("Aggregation", bound=Callable[..., Any])


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


def with_stderr(stderr: Callable[[list[Any]], float]) -> Callable[[Aggregation], Aggregation]:
    """Attach a standard-error function to a corpus-level aggregation, as ``medeval_stderr``.

    lm-eval does not read it: it reports "N/A" as the stderr of every aggregation it does not know (a
    corpus-level macro-F1, an agreement statistic), and the pack leaves lm-eval's stderr rule as it is.
    The attached function is what a reader of the logged samples (the pack's report) computes it with.
    """

    def attach(aggregation: Aggregation) -> Aggregation:
        aggregation.medeval_stderr = stderr  # type: ignore[attr-defined]
        return aggregation

    return attach


def _order_free_stderr(items: list[float]) -> float:
    """lm-eval's closed-form stderr of the mean, with exactly rounded sums (``mean_and_stderr``)."""
    return mean_and_stderr(items, order_free=True)[1] if len(items) > 1 else 0.0


_order_free_stderr.closed_form = True  # type: ignore[attr-defined]  # cheap: reported even with --bootstrap_iters 0


@with_stderr(_order_free_stderr)
def order_free_mean(items: list[float]) -> float:
    """lm-eval aggregation: the mean with an exactly rounded sum (math.fsum).

    A data-parallel run gathers per-item values rank by rank, so lm-eval's ``mean`` (a plain float
    sum) can differ from the single-process run in the last bit; this one is the same in any order.
    lm-eval gives it no stderr of its own ("N/A"); its closed-form one is attached (``with_stderr``).
    """
    return mean_and_stderr(items, order_free=True)[0]
