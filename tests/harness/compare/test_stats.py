from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.compare.stats import (
    holm,
    iqm,
    mean_ci,
    probability_of_improvement,
    sign_flip_pvalue,
    stratified_iqm,
)

finite = st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False)


# --- permutation test: exhaustive tiny cases worked by hand ---------------------------------


def test_sign_flip_exact_three_pairs() -> None:
    # 8 sign patterns of (1, 2, 3); |mean| >= 2 only for +++ and ---.
    assert sign_flip_pvalue([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)


def test_sign_flip_exact_five_pairs() -> None:
    assert sign_flip_pvalue([1.0, 2.0, 3.0, 4.0, 5.0]) == pytest.approx(2 / 32)


def test_sign_flip_exact_with_ties_counts_ties_as_extreme() -> None:
    # (1, 1): patterns ++ and -- give |mean| 1 >= 1, +- and -+ give 0 -> p = 1/2.
    assert sign_flip_pvalue([1.0, 1.0]) == pytest.approx(0.5)
    # (2, -1, 1): |sum| >= 2 for sign patterns whose sum is +-2 or +-4 -> enumerate by hand:
    # sums: 2-1+1=2, 2-1-1=0, 2+1+1=4, 2+1-1=2, and their negatives -> 6 of 8 reach |sum| >= 2.
    assert sign_flip_pvalue([2.0, -1.0, 1.0]) == pytest.approx(6 / 8)


def test_sign_flip_zero_differences_give_one() -> None:
    assert sign_flip_pvalue([0.0, 0.0, 0.0]) == 1.0
    assert sign_flip_pvalue([]) == 1.0


def test_sign_flip_monte_carlo_never_zero_and_close_to_exact_tail() -> None:
    d = np.full(20, 1.0)  # exact p = 2 / 2**20
    p = sign_flip_pvalue(d, n_resamples=5000, seed=1)
    assert p == pytest.approx(1 / 5001)


def test_sign_flip_rejects_nonfinite() -> None:
    with pytest.raises(ValueError, match="finite"):
        sign_flip_pvalue([1.0, math.nan])


# --- bootstrap CIs: known answers on fixed data ----------------------------------------------


def test_mean_ci_matches_normal_theory_on_large_sample() -> None:
    x = np.random.default_rng(7).normal(10.0, 2.0, size=2000)
    ci = mean_ci(x, n_resamples=4000, seed=3)
    half = 1.959964 * x.std(ddof=1) / math.sqrt(x.size)
    assert ci.method == "BCa"
    assert ci.estimate == pytest.approx(x.mean())
    assert ci.lo == pytest.approx(x.mean() - half, abs=0.15 * half)
    assert ci.hi == pytest.approx(x.mean() + half, abs=0.15 * half)


def test_mean_ci_two_values_is_the_exact_percentile_interval() -> None:
    # Bootstrap distribution of the mean of {0, 1}: 0 (1/4), 0.5 (1/2), 1 (1/4) -> 95 % CI [0, 1].
    ci = mean_ci([0.0, 1.0], n_resamples=4000, seed=0)
    assert ci.method == "percentile"
    assert (ci.lo, ci.hi) == (0.0, 1.0)


def test_mean_ci_degenerate_and_single() -> None:
    assert mean_ci([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0, "degenerate")
    one = mean_ci([3.0])
    assert one.estimate == 3.0 and math.isnan(one.lo) and one.method == "none"


def test_mean_ci_bca_is_skew_aware() -> None:
    # A right-skewed sample: BCa shifts the interval right of the percentile interval's midpoint.
    x = np.random.default_rng(0).exponential(1.0, size=60)
    ci = mean_ci(x, n_resamples=4000, seed=0)
    assert ci.method == "BCa"
    assert ci.hi - ci.estimate > ci.estimate - ci.lo


# --- Holm: hand examples -------------------------------------------------------------------


def test_holm_hand_example() -> None:
    # sorted: .005*4=.02, .01*3=.03, .03*2=.06, .04*1=.04 -> running max .02 .03 .06 .06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_skips_nan() -> None:
    out = holm([0.6, math.nan, 0.2])
    assert out[0] == pytest.approx(0.6) and math.isnan(out[1]) and out[2] == pytest.approx(0.4)
    assert holm([0.9, 0.8]) == [1.0, 1.0]  # 2 * 0.8 capped at 1, and the step-down is monotone


# --- IQM, stratified bootstrap, probability of improvement ---------------------------------


def test_iqm_known_values() -> None:
    assert iqm(np.arange(1.0, 9.0)) == pytest.approx(4.5)  # mean of 3, 4, 5, 6
    assert iqm([1.0, 2.0, 3.0, 100.0]) == pytest.approx(2.5)  # the outlier is trimmed


def test_stratified_iqm_keeps_strata_sizes() -> None:
    # Task t1 is all 0, task t2 all 1: every stratified resample keeps 4 zeros and 4 ones,
    # so the IQM is 0.5 in every resample and the interval is exactly [0.5, 0.5].
    ci = stratified_iqm({"t1": [0.0] * 4, "t2": [1.0] * 4}, n_resamples=500)
    assert (ci.estimate, ci.lo, ci.hi) == (0.5, 0.5, 0.5)


def test_probability_of_improvement_hand_example() -> None:
    # t1: A (2, 3) vs B (1, 3): pairs > : (2,1),(3,1) ; = : (3,3) -> (2 + 0.5) / 4 = 0.625
    # t2: A (1,) vs B (0,) -> 1.0 ; average 0.8125
    ci = probability_of_improvement({"t1": [2.0, 3.0], "t2": [1.0]}, {"t1": [1.0, 3.0], "t2": [0.0]})
    assert ci.estimate == pytest.approx(0.8125)
    assert 0.0 <= ci.lo <= ci.estimate <= ci.hi <= 1.0


def test_probability_of_improvement_needs_same_tasks() -> None:
    with pytest.raises(ValueError, match="tasks differ"):
        probability_of_improvement({"t1": [1.0]}, {"t2": [1.0]})


# --- invariants ------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(finite, finite), min_size=1, max_size=9))
def test_swapping_a_and_b_negates_difference_and_keeps_p(pairs: list[tuple[float, float]]) -> None:
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    ab, ba = mean_ci(a - b, n_resamples=300), mean_ci(b - a, n_resamples=300)
    assert ab.estimate == pytest.approx(-ba.estimate, abs=1e-9)
    if ab.method in ("degenerate", "percentile", "none") and ab.method == ba.method and ab.method != "none":
        assert ab.lo == pytest.approx(-ba.hi, abs=1e-6) and ab.hi == pytest.approx(-ba.lo, abs=1e-6)
    assert sign_flip_pvalue(a - b) == pytest.approx(sign_flip_pvalue(b - a))
    assert 0.0 < sign_flip_pvalue(a - b) <= 1.0


@settings(max_examples=40, deadline=None)
@given(st.lists(finite, min_size=1, max_size=6), st.lists(finite, min_size=1, max_size=6))
def test_poi_of_a_over_b_and_b_over_a_sum_to_one(a: list[float], b: list[float]) -> None:
    ab = probability_of_improvement({"t": a}, {"t": b}, n_resamples=50)
    ba = probability_of_improvement({"t": b}, {"t": a}, n_resamples=50)
    assert ab.estimate + ba.estimate == pytest.approx(1.0)


@settings(max_examples=40, deadline=None)
@given(st.lists(finite, min_size=1, max_size=30))
def test_iqm_lies_within_the_sample_and_ci_contains_nothing_outside(x: list[float]) -> None:
    v = iqm(x)
    assert min(x) - 1e-9 <= v <= max(x) + 1e-9
    ci = stratified_iqm({"t": x}, n_resamples=100)
    assert min(x) - 1e-9 <= ci.lo <= ci.hi <= max(x) + 1e-9
