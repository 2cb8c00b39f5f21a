"""Small statistics shared by the pack: means with the same standard error lm-eval reports."""

from __future__ import annotations

import math
from typing import Iterable


def mean_and_stderr(values: Iterable[float]) -> tuple[float, float]:
    """Mean and standard error of the mean (sample sd with n-1, over sqrt(n)), as lm-eval's ``mean``.

    One value has no spread to measure: its stderr is reported as 0.0, never "N/A".
    """
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("mean_and_stderr needs at least one value")
    n = len(xs)
    mean = sum(xs) / n
    if n == 1:
        return mean, 0.0
    variance = sum((x - mean) ** 2 for x in xs) / (n - 1)
    return mean, math.sqrt(variance / n)


def normal_ci(mean: float, stderr: float, z: float = 1.959963984540054) -> tuple[float, float]:
    """A two-sided normal-approximation confidence interval (95% by default)."""
    return mean - z * stderr, mean + z * stderr
