"""Panel aggregation, hand-computed: HELM panel score, MedARC reward, unscored handling, agreement."""

from __future__ import annotations

import json
import math

import pytest

from medeval_metrics.judge.aggregate import (
    agreement,
    agreement_stderr,
    item_metrics,
    krippendorff_alpha_ordinal,
    structured_verdicts,
    success_by_judge,
    summarise,
)

DIMS = ("accuracy", "completeness", "clarity")


def v(acc, comp, clar):
    return {"scores": {"accuracy": acc, "completeness": comp, "clarity": clar}}


UNSCORED = {"scores": None, "unscored_reason": "HTTP 500 after 5 request(s)"}


def test_item_metrics_two_scored_one_unscored():
    out = item_metrics({"a": v(4, 5, 3), "b": v(2, 3, 4), "c": UNSCORED}, DIMS, ["a", "b", "c"])
    # HELM: mean of the 6 integer scores of the judges that answered = 21/6
    assert out["judge_panel_score"] == pytest.approx(3.5)
    # MedARC: mean over judges of mean(dim/5) = (12/15 + 9/15) / 2
    assert out["judge_reward"] == pytest.approx(0.7)
    assert (out["judge_accuracy"], out["judge_completeness"], out["judge_clarity"]) == (3.0, 4.0, 3.5)
    assert out["judge_unscored_rate"] == pytest.approx(1 / 3)
    # per-judge success is no metric (its name would be the judge's): it is read from judge_verdicts
    assert not [key for key in out if key.startswith("judge_success")]
    assert out["judge_agreement"] == ((4, 2, None), (5, 3, None), (3, 4, None))


def test_item_no_judge_answered_is_never_a_score():
    # HELM would give this item 1.0 and MedARC 0.0; here it has no score, only an unscored rate of 1
    out = item_metrics({"a": UNSCORED, "b": UNSCORED}, DIMS, ["a", "b"])
    assert out["judge_unscored_rate"] == 1.0
    assert not {"judge_panel_score", "judge_reward", "judge_accuracy"} & set(out)


def test_single_judge_has_no_agreement():
    out = item_metrics({"a": v(5, 5, 5)}, DIMS, ["a"])
    assert "judge_agreement" not in out and out["judge_reward"] == 1.0 and out["judge_panel_score"] == 5.0


def test_over_items_unscored_items_do_not_drag_means_down():
    verdicts = [
        {"a": v(4, 4, 4), "b": v(2, 2, 2)},  # panel 3.0, reward 0.6
        {"a": v(5, 5, 5), "b": UNSCORED},  # panel 5.0, reward 1.0
        {"a": UNSCORED, "b": UNSCORED},  # no scores
    ]
    items = [item_metrics(row, DIMS, ["a", "b"]) for row in verdicts]
    summary = summarise(items)
    assert summary["judge_panel_score"]["value"] == pytest.approx(4.0) and summary["judge_panel_score"]["n"] == 2
    # sample sd of (3, 5) is sqrt(2); stderr = sqrt(2)/sqrt(2) = 1
    assert summary["judge_panel_score"]["stderr"] == pytest.approx(1.0)
    assert summary["judge_reward"]["value"] == pytest.approx(0.8)
    assert summary["judge_unscored_rate"]["value"] == pytest.approx((0 + 0.5 + 1) / 3)
    # per judge, from the logged verdicts: a scored 2 of 3 items, b 1 of 3 (what judge_success_a/_b were):
    # sample sd of (1, 1, 0) is sqrt(1/3), stderr sqrt(1/3)/sqrt(3) = 1/3
    success = success_by_judge([structured_verdicts(row, ["a", "b"]) for row in verdicts])
    assert success["a"] == {"value": pytest.approx(2 / 3), "stderr": pytest.approx(1 / 3), "n": 3, "scored": 2}
    assert success["b"] == {"value": pytest.approx(1 / 3), "stderr": pytest.approx(1 / 3), "n": 3, "scored": 1}
    assert not [key for key in summary if key.startswith("judge_success")]
    # as the samples log them (JSON text): the same
    assert success_by_judge([json.dumps(structured_verdicts(row, ["a", "b"])) for row in verdicts]) == success


def test_alpha_binary_values():
    # coincidences o11=2, o12=o21=1, o22=2; n=6; alpha = 1 - 5 * 2 / (2*3*3) = 4/9
    assert krippendorff_alpha_ordinal([(1, 1), (1, 2), (2, 2)]) == pytest.approx(4 / 9)


def test_alpha_ordinal_metric_hand_computed():
    # units (1,3), (2,2), (1,1): n1=3, n2=2, n3=1, n=6
    # ordinal delta^2: d(1,2)=((3+2)/2)^2=6.25, d(1,3)=(6-(3+1)/2)^2=16, d(2,3)=((2+1)/2)^2=2.25
    # observed = 2*16 = 32; expected = 2*(3*2*6.25 + 3*1*16 + 2*1*2.25) = 180
    # alpha = 1 - 5*32/180 = 1/9 (the interval metric would give 0: the test tells them apart)
    assert krippendorff_alpha_ordinal([(1, 3), (2, 2), (1, 1)]) == pytest.approx(1 / 9)


def test_alpha_missing_values_and_degenerate_cases():
    base = krippendorff_alpha_ordinal([(1, 3), (2, 2), (1, 1)])
    # a unit with one value is not pairable and changes nothing
    assert krippendorff_alpha_ordinal([(1, 3, None), (2, None, 2), (1, 1, None), (None, 4, None)]) == pytest.approx(
        base
    )
    assert krippendorff_alpha_ordinal([(1, 2), (3, 4), (5, 5)]) < krippendorff_alpha_ordinal([(1, 1), (3, 3), (5, 4)])
    assert krippendorff_alpha_ordinal([(2, 2), (3, 3)]) == pytest.approx(1.0)
    assert math.isnan(krippendorff_alpha_ordinal([(4, 4), (4, 4)]))  # no variation: undefined
    assert math.isnan(krippendorff_alpha_ordinal([(4, None)]))


def test_agreement_pools_dimensions_of_all_items_and_has_a_stderr():
    items = [((1, 3), (2, 2)), ((1, 1),)]
    assert agreement(items) == pytest.approx(1 / 9)
    many = [((s, s), ((s % 5) + 1, s)) for s in (1, 2, 3, 4, 5, 1, 2, 3)]
    stderr = agreement_stderr(many)
    assert 0.0 < stderr < 1.0
    assert agreement_stderr(many) == stderr  # seeded: reproducible
    assert agreement_stderr(many[:1]) == 0.0


@pytest.mark.parametrize("seed", range(6))
def test_agreement_matches_the_krippendorff_package(seed):
    import random

    import numpy as np

    krippendorff = pytest.importorskip("krippendorff")
    rng = random.Random(seed)
    judges, units = 2 + seed % 3, 30 + 7 * seed
    # correlated judges on a 1-5 scale, about 15% of verdicts missing (unscored)
    truth = [rng.randint(1, 5) for _ in range(units)]
    rows = [
        tuple(None if rng.random() < 0.15 else max(1, min(5, t + rng.choice((-1, 0, 0, 1)))) for _ in range(judges))
        for t in truth
    ]
    ours = krippendorff_alpha_ordinal(rows)
    data = np.array([[np.nan if row[j] is None else row[j] for row in rows] for j in range(judges)], dtype=float)
    theirs = krippendorff.alpha(reliability_data=data, level_of_measurement="ordinal")
    assert ours == pytest.approx(theirs, abs=1e-9)
