"""Shared statistics: lm-eval's closed-form stderr, and real stderrs for corpus-level aggregations."""

import math

import pytest

from medeval_metrics.stats import install_stderr_hook, mean_and_stderr, normal_ci, with_stderr


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


def test_hook_gives_attached_stderr_and_leaves_others_alone():
    from lm_eval import evaluator_utils
    from lm_eval.api.metrics import mean

    def spread(items):
        return max(items) - min(items)

    @with_stderr(spread)
    def corpus_max(items):
        return max(items)

    def unknown(items):
        return 0.0

    before = evaluator_utils.stderr_for_metric(metric=unknown, bootstrap_iters=100)
    install_stderr_hook()
    install_stderr_hook()  # idempotent
    lookup = evaluator_utils.stderr_for_metric
    assert lookup(metric=corpus_max, bootstrap_iters=100)([1, 4, 2]) == 3
    assert lookup(metric=corpus_max, bootstrap_iters=0) is None  # bootstrap disabled: lm-eval's own rule
    assert lookup(metric=unknown, bootstrap_iters=100) is before is None
    assert lookup(metric=mean, bootstrap_iters=100)([0.0, 1.0]) == pytest.approx(0.5)
