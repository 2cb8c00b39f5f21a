"""Shared statistics: lm-eval's closed-form stderr, and stderrs attached to corpus-level aggregations for
readers of the logged samples (lm-eval's own stderr rule is left as it is)."""

import math

import pytest

from medeval_metrics.stats import mean_and_stderr, normal_ci


@pytest.mark.parametrize(
    "values, mean, stderr",
    [
        ([1, 0, 1, 1], 0.75, math.sqrt(0.25 / 4)),  # sample variance (n-1) = 0.25
        ([2.0, 4.0], 3.0, 1.0),  # variance 2, sqrt(2/2) = 1
        ([5.0], 5.0, 0.0),
        ([1, 1, 1], 1.0, 0.0),
    ],
)
def test_mean_and_stderr(values, mean, stderr):
    assert mean_and_stderr(values) == (pytest.approx(mean), pytest.approx(stderr))


def test_mean_and_stderr_matches_lm_eval():
    from lm_eval.api.metrics import mean_stderr

    values = [0.0, 1.0, 1.0, 0.5, 0.25]
    assert mean_and_stderr(values)[1] == pytest.approx(mean_stderr(values))


def test_mean_of_nothing_is_an_error():
    with pytest.raises(ValueError):
        mean_and_stderr([])


def test_normal_ci():
    low, high = normal_ci(0.5, 0.1)
    assert low == pytest.approx(0.5 - 0.196, abs=1e-4) and high == pytest.approx(0.5 + 0.196, abs=1e-4)


def test_stats_imports_nothing_that_patches_lm_eval():
    import ast
    from pathlib import Path

    from medeval_metrics import stats

    tree = ast.parse(Path(stats.__file__).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert not any("lm_eval_compat" in (name or "") for name in imported)
    assert not hasattr(stats, "install_stderr_hook")


@pytest.mark.parametrize(
    "successes, n, low, high",
    [
        # by hand, z = 1.96: centre (p + z^2/2n) / (1 + z^2/n), half-width z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2)
        (2, 2, 0.342, 1.0),  # centre 2.9207 -> 0.6712, half 0.6711 * 0.4900 = 0.3288
        (0, 2, 0.0, 0.658),
        (1, 1, 0.207, 1.0),  # one item still has an interval: centre 0.6033, half 0.4048 * 0.9800 = 0.3967
        (0, 1, 0.0, 0.793),
        (5, 10, 0.237, 0.763),  # centre 0.5, half 1.4160 * 0.1860 = 0.2634
    ],
)
def test_wilson_interval_by_hand(successes, n, low, high):
    from medeval_metrics.stats import wilson_interval

    assert wilson_interval(successes, n) == (pytest.approx(low, abs=5e-4), pytest.approx(high, abs=5e-4))


def test_wilson_interval_ends_are_exact_at_0_and_n_and_it_refuses_impossible_counts():
    from medeval_metrics.stats import wilson_interval

    assert wilson_interval(0, 7)[0] == 0.0 and wilson_interval(7, 7)[1] == 1.0
    for successes, n in ((3, 2), (-1, 2), (0, 0)):
        with pytest.raises(ValueError):
            wilson_interval(successes, n)


def test_interval_is_wilson_for_a_whole_count_of_items_and_normal_otherwise():
    from medeval_metrics.stats import interval

    wilson = interval(1.0, 0.0, 2, proportion=True)
    assert (wilson.method, round(wilson.low, 3), wilson.high) == ("Wilson", 0.342, 1.0)
    assert wilson.text() == "0.342–1.000 (Wilson)"
    # 0.25 of 2 items is no whole count (the mean is over other items): the normal interval, clipped to 0-1
    normal = interval(0.25, 0.2, 2, proportion=True, bounds=(0.0, 1.0))
    assert normal.method == "normal" and normal.low == 0.0 and normal.high == pytest.approx(0.25 + 1.96 * 0.2, abs=1e-3)
    assert interval(0.5, None, 4, proportion=False) is None  # no stderr, no proportion: none
    assert interval(1.0, None, 1, proportion=True).low == pytest.approx(0.207, abs=5e-4)  # one item has one
