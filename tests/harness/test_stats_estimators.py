from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.stats.estimators import bootstrap_ci, holm_bonferroni, mean_sem, paired_bootstrap_delta

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
pvals = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(st.lists(finite, min_size=2, max_size=50))
def test_sem_matches_formula(xs: list[float]) -> None:
    n = len(xs)
    m = sum(xs) / n
    s = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    mean, sem = mean_sem(xs)
    assert mean == pytest.approx(m, rel=1e-9, abs=1e-6)
    assert sem == pytest.approx(s / math.sqrt(n), rel=1e-6, abs=1e-6)


def test_mean_sem_small_samples() -> None:
    mean, sem = mean_sem([3.5])
    assert mean == 3.5 and math.isnan(sem)
    mean, sem = mean_sem([])
    assert math.isnan(mean) and math.isnan(sem)
    assert mean_sem([1.0, 3.0]) == (2.0, pytest.approx(1.0))
    with pytest.raises(ValueError):
        mean_sem([1.0, float("nan")])
    with pytest.raises(ValueError):
        mean_sem([[1.0, 2.0]])


@given(finite, st.integers(min_value=1, max_value=30), st.integers(min_value=0, max_value=2**32 - 1))
@settings(max_examples=50)
def test_bootstrap_ci_constant_data_is_degenerate(c: float, n: int, seed: int) -> None:
    values = [c] * n
    lo, hi = bootstrap_ci(values, seed=seed)
    m = float(np.mean(values))
    assert lo == hi == m
    assert lo <= m <= hi


@given(st.lists(finite, min_size=2, max_size=30), st.integers(min_value=0, max_value=1000))
@settings(max_examples=30, deadline=None)
def test_bootstrap_ci_is_ordered_and_within_range(xs: list[float], seed: int) -> None:
    lo, hi = bootstrap_ci(xs, n_boot=200, seed=seed)
    assert min(xs) - 1e-6 <= lo <= hi <= max(xs) + 1e-6


def test_bootstrap_ci_seeded_and_narrows_with_level() -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(5.0, 1.0, size=40)
    assert bootstrap_ci(x, seed=3) == bootstrap_ci(x, seed=3)
    lo95, hi95 = bootstrap_ci(x, level=0.95)
    lo50, hi50 = bootstrap_ci(x, level=0.50)
    assert lo95 <= lo50 <= float(np.mean(x)) <= hi50 <= hi95
    # a generic statistic takes the slow path and agrees on the ordering
    lo_med, hi_med = bootstrap_ci(x, stat=np.median, n_boot=500)
    assert lo_med <= float(np.median(x)) <= hi_med
    for bad in ({"level": 0.0}, {"level": 1.0}, {"n_boot": 0}):
        with pytest.raises(ValueError):
            bootstrap_ci(x, **bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        bootstrap_ci([])


def test_paired_bootstrap_delta() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(0.0, 10.0, size=30)  # large shared seed effect
    a = base + 1.0 + rng.normal(0.0, 0.1, size=30)
    b = base
    res = paired_bootstrap_delta(a, b)
    assert res.n == 30
    assert res.delta == pytest.approx(float(np.mean(a - b)))
    assert 0.5 < res.lo <= res.delta <= res.hi < 1.5  # pairing removes the seed variance
    by_seed_a = {s: float(v) for s, v in enumerate(a)}
    by_seed_b = {s: float(v) for s, v in enumerate(b)} | {99: 0.0}  # unmatched seed ignored
    assert paired_bootstrap_delta(by_seed_a, by_seed_b) == res
    with pytest.raises(ValueError):
        paired_bootstrap_delta([1.0, 2.0], [1.0])
    with pytest.raises(ValueError):
        paired_bootstrap_delta({1: 1.0}, {2: 1.0})
    with pytest.raises(TypeError):
        paired_bootstrap_delta({1: 1.0}, [1.0])


@given(st.lists(pvals, max_size=30))
def test_holm_properties(ps: list[float]) -> None:
    adj = holm_bonferroni(ps)
    assert len(adj) == len(ps)
    for raw, a in zip(ps, adj, strict=True):
        assert raw <= a <= 1.0
    order = sorted(range(len(ps)), key=lambda i: ps[i])
    sorted_adj = [adj[i] for i in order]
    assert all(x <= y for x, y in zip(sorted_adj, sorted_adj[1:], strict=False))


def test_holm_hand_computed() -> None:
    # sorted: 0.01*3=0.03, 0.02*2=0.04, 0.04*1=0.04 -> back in input order
    assert holm_bonferroni([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm_bonferroni([0.5, 0.6]) == pytest.approx([1.0, 1.0])
    assert holm_bonferroni([]) == []
    with pytest.raises(ValueError):
        holm_bonferroni([1.5])
    with pytest.raises(ValueError):
        holm_bonferroni([float("nan")])
