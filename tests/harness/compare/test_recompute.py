"""Every statistic of ``bench compare`` recomputed independently: scipy, exhaustive enumeration, rliable.

rliable (``pip install --no-deps rliable``: its ``metrics`` module needs only numpy and scipy) is
used when installed; otherwise the same definitions are recomputed here in plain numpy.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from harness.compare.paired import compare
from harness.compare.select import VariantRuns
from harness.compare.stats import holm, mean_ci, probability_of_improvement, sign_flip_pvalue, stratified_iqm

try:
    from rliable import metrics as rly
except ImportError:  # pragma: no cover - depends on the environment
    rly = None

small = st.floats(-10.0, 10.0, allow_nan=False).map(lambda x: round(x, 3))


def _iqm_ref(scores: np.ndarray) -> float:
    """IQM of a (runs x tasks) matrix: rliable's aggregate_iqm, or a sorted-trim by hand."""
    if rly is not None:
        return float(rly.aggregate_iqm(scores))
    x = np.sort(scores.ravel())
    k = int(0.25 * x.size)  # scipy.stats.trim_mean cuts floor(0.25 n) from each end
    return float(x[k : x.size - k].mean())


def _poi_ref(x: np.ndarray, y: np.ndarray) -> float:
    """P(X > Y) + P(X = Y) / 2 averaged over tasks: rliable, or all pairs counted by hand."""
    if rly is not None:
        return float(rly.probability_of_improvement(x, y))
    per_task = [
        np.mean([(a > b) + 0.5 * (a == b) for a in x[:, t] for b in y[:, t]]) for t in range(x.shape[1])
    ]
    return float(np.mean(per_task))


def _sign_flip_ref(d: np.ndarray) -> float:
    obs = abs(d.mean())
    hits = [abs(np.mean(np.array(s) * d)) >= obs - 1e-12 for s in itertools.product((1, -1), repeat=d.size)]
    return float(np.mean(hits))


def _holm_ref(p: list[float]) -> list[float]:
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return out


@settings(max_examples=30, deadline=None)
@given(d=st.lists(small, min_size=3, max_size=9))
def test_mean_ci_is_scipys_bootstrap_bit_for_bit(d: list[float]) -> None:
    x = np.asarray(d)
    if np.all(x == x[0]):
        return
    got = mean_ci(x, n_resamples=999, seed=7)
    ref = sps.bootstrap(
        (x,), np.mean, n_resamples=999, method=got.method, vectorized=True, rng=np.random.default_rng(7)
    ).confidence_interval
    if got.method in ("BCa", "percentile") and math.isfinite(ref.low):
        assert (got.lo, got.hi) == (min(ref.low, ref.high), max(ref.low, ref.high))
    assert got.estimate == pytest.approx(float(x.mean()))


@settings(max_examples=30, deadline=None)
@given(d=st.lists(small, min_size=1, max_size=10))
def test_sign_flip_is_the_exact_enumeration(d: list[float]) -> None:
    x = np.asarray(d)
    assert sign_flip_pvalue(x) == pytest.approx(1.0 if not np.any(x) else _sign_flip_ref(x))


@given(p=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=12))
def test_holm_matches_the_step_down_definition(p: list[float]) -> None:
    assert holm(p) == pytest.approx(_holm_ref(p))


@settings(max_examples=30, deadline=None)
@given(
    a=st.lists(st.lists(small, min_size=4, max_size=4), min_size=2, max_size=6),
    b=st.lists(st.lists(small, min_size=4, max_size=4), min_size=2, max_size=6),
)
def test_iqm_and_probability_of_improvement_match_rliable(a: list[list[float]], b: list[list[float]]) -> None:
    xa, xb = np.asarray(a), np.asarray(b)  # runs x tasks
    tasks = lambda m: {f"t{t}": m[:, t] for t in range(m.shape[1])}  # noqa: E731
    assert stratified_iqm(tasks(xa), n_resamples=50).estimate == pytest.approx(_iqm_ref(xa))
    poi = probability_of_improvement(tasks(xa), tasks(xb), n_resamples=50).estimate
    assert poi == pytest.approx(_poi_ref(xa, xb))


def test_compare_reports_exactly_the_recomputed_figures() -> None:
    import pandas as pd

    rng = np.random.default_rng(3)
    ua, ub = rng.uniform(0, 1, 6), rng.uniform(0, 1, 6)
    runs = pd.DataFrame(
        [
            {"run_id": f"a{s}", "agent": "A", "seed": s, "score": ua[s], "u": ua[s], "auc": ua[s] / 2}
            for s in range(6)
        ]
        + [
            {"run_id": f"b{s}", "agent": "B", "seed": s, "score": ub[s], "u": ub[s], "auc": ub[s] / 2}
            for s in range(6)
        ]
    )
    c = compare([VariantRuns("v", "h", True, runs)], ("A", "B"), n_resamples=999, seed=5)
    u = next(r for r in c.paired if r.metric == "u")
    d = ua - ub
    ref = sps.bootstrap(
        (d,), np.mean, n_resamples=999, method="BCa", vectorized=True, rng=np.random.default_rng(5)
    )
    assert (u.ci_lo, u.ci_hi) == (ref.confidence_interval.low, ref.confidence_interval.high)
    assert u.p_value == pytest.approx(_sign_flip_ref(d))
    assert u.p_holm == pytest.approx(_holm_ref([u.p_value])[0])  # Holm runs per metric: one test here
    iqm_a = next(g for g in c.aggregates if g.kind == "iqm" and g.agent_a == "A")
    assert iqm_a.estimate == pytest.approx(_iqm_ref(ua[:, None]))
    poi = next(g for g in c.aggregates if g.kind == "poi")
    assert poi.estimate == pytest.approx(_poi_ref(ua[:, None], ub[:, None]))
