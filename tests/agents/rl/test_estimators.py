import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.rl import estimators as E

# Rewards like the trainer's: -1 failures, progress on [0, 5], many ties.
reward_values = st.one_of(st.sampled_from([-1.0, 0.0, 1.0, 2.5, 5.0]), st.floats(-1.0, 5.0))
groups = st.lists(reward_values, min_size=2, max_size=8)


def brute_pkpo(g, k):
    n = len(g)
    tot = [Fraction(0)] * n
    for subset in itertools.combinations(range(n), k):
        m = max(Fraction(g[j]) for j in subset)
        for i in subset:
            tot[i] += m
    return [float(t / math.comb(n, k)) for t in tot]


def brute_sloo(g, k):
    n = len(g)
    tot = [Fraction(0)] * n
    for subset in itertools.combinations(range(n), k):
        m = max(Fraction(g[j]) for j in subset)
        for i in subset:
            tot[i] += m - max(Fraction(g[b]) for b in subset if b != i)
    return [float(t / math.comb(n, k)) for t in tot]


@settings(max_examples=150, deadline=None)
@given(groups, st.data())
def test_pkpo_and_sloo_match_subset_enumeration(g, data):
    n = len(g)
    k = data.draw(st.integers(2, n))
    np.testing.assert_allclose(E.sloo_minus_one(g, k), brute_sloo(g, k), rtol=0, atol=1e-12)
    np.testing.assert_allclose(E.sloo_minus_one_direct(g, k), brute_sloo(g, k), rtol=0, atol=1e-12)
    kp = data.draw(st.integers(1, n))
    np.testing.assert_allclose(E.pkpo(g, kp), brute_pkpo(g, kp), rtol=0, atol=1e-12)


def test_hand_values():
    g = [1, 3, 2, 5]
    np.testing.assert_allclose(E.pkpo(g, 2), [5 / 3, 11 / 6, 5 / 3, 5 / 2], atol=1e-15)
    np.testing.assert_allclose(E.sloo_minus_one(g, 2), [0, 1 / 2, 1 / 6, 3 / 2], atol=1e-15)
    np.testing.assert_allclose(E.pkpo(g, 1), np.array(g) / 4, atol=1e-15)
    # k = N: only the argmax is non-zero, with g_max - g_2nd.
    np.testing.assert_allclose(E.sloo_minus_one(g, 4), [0, 0, 0, 2], atol=1e-15)
    # Ties at the top: neither tied maximum wins a subset strictly.
    np.testing.assert_allclose(E.sloo_minus_one([-1, 5, 5], 3), [0, 0, 0], atol=1e-15)
    np.testing.assert_allclose(E.sloo_minus_one([-1, 5, 5], 2), [0, 2, 2], atol=1e-15)
    # N = 2
    np.testing.assert_allclose(E.sloo_minus_one([-1.0, 2.0], 2), [0, 3], atol=1e-15)
    np.testing.assert_allclose(E.grpo([-1.0, 1.0], eps=0.0), [-1, 1])
    np.testing.assert_allclose(E.grpo([0.0, 1.0, 2.0], eps=0.0), np.array([-1, 0, 1]) / math.sqrt(2 / 3))
    np.testing.assert_allclose(E.grpo([0.0, 1.0, 2.0], eps=0.0, ddof=1), [-1, 0, 1])
    np.testing.assert_allclose(E.dr_grpo([-1, 1, 3]), [-2, 0, 2])
    np.testing.assert_allclose(E.rloo([-1, 1, 3]), [-3, 0, 3])
    np.testing.assert_array_equal(E.grpo([2.0, 2.0, 2.0]), [0, 0, 0])
    # Reference run in notes §1.5.1 (entropic, gamma = ln 2, reachable for N = 8).
    r = [-1.0, 0.4, 2.5, 2.6, 4.9, -1.0, 3.3, 1.2]
    a = E.entropic(r, eps=1e-8)
    np.testing.assert_allclose(a[[0, 4, 6]], [-0.9434, 7.4202, 0.4732], atol=1e-4)
    mix = E.phase_mix(r, 2, 0.5, eps_num=1e-6, eps_skip=1e-4)
    assert not isinstance(mix, E.Skip)
    np.testing.assert_allclose(mix[[0, 4, 7]], [-1.196, 1.886, -0.323], atol=1e-3)


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        E.sloo_minus_one([1.0, 2.0], 1)
    with pytest.raises(ValueError):
        E.sloo_minus_one([1.0, 2.0], 3)
    with pytest.raises(ValueError):
        E.grpo([1.0, float("nan")])
    with pytest.raises(ValueError):
        E.rloo([1.0])
    with pytest.raises(ValueError):
        E.grpo(np.ones((2, 2)))
    with pytest.raises(TypeError):
        E.pkpo([1.0, 2.0], 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        E.phase_mix([1.0, 2.0], 2, alpha=1.5)
    with pytest.raises(KeyError):
        E.compute_advantages("nope", [1.0, 2.0])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(-1.0, 5.0), min_size=3, max_size=10))
def test_beta_solves_kl_equation(r):
    r = np.array(r)
    n = r.size
    ties = int(np.sum(r >= r.max() - 1e-9 * (r.max() - r.min())))
    if r.max() - r.min() < 1e-6 or math.log(n / ties) * 0.9 <= math.log(2) + 1e-9:
        return  # unreachable targets are covered by test_entropic_guards
    beta = E.solve_beta(r)
    assert E.tilted_kl(r, beta) == pytest.approx(math.log(2), abs=1e-9)
    # Invariance to shift and positive scale (when the affine map keeps the gaps' digits).
    gaps = np.diff(np.unique(r))
    if gaps.min() < 1e-6 * (r.max() - r.min()):
        return
    np.testing.assert_allclose(E.entropic(3 * r + 10), E.entropic(r), atol=1e-8)
    assert E.solve_beta(3 * r + 10) == pytest.approx(beta / 3, rel=1e-7)


def test_entropic_guards():
    # N = 2: ln 2 is the unreachable supremum; the target is lowered, beta stays finite.
    a = E.entropic([0.0, 1.0])
    assert np.all(np.isfinite(a)) and a[1] > 0 > a[0]
    beta = E.solve_beta([0.0, 1.0])
    assert E.tilted_kl([0.0, 1.0], beta) == pytest.approx(0.9 * math.log(2), abs=1e-9)
    # Half the group tied at the maximum: sup = ln 2 again.
    a = E.entropic([0.0, 0.0, 5.0, 5.0])
    assert np.all(np.isfinite(a)) and a[2] == a[3] > 0
    # Constant group: exactly zero (was -eps, which defeated the trainer's all-zero skip).
    for beta in (None, 2.0):
        a = E.entropic([2.0, 2.0, 2.0], beta=beta)
        assert a.tolist() == [0.0, 0.0, 0.0] and not np.any(a != 0.0)
    # Huge fixed beta: no overflow, finite (bounded by 1/eps).
    a = E.entropic([-1.0, 0.0, 1e9], beta=1e6)
    assert np.all(np.isfinite(a))
    with pytest.raises(ValueError):
        E.entropic([0.0, 1.0], beta=-1.0)


@settings(max_examples=100, deadline=None)
@given(groups, st.data(), st.sampled_from([0.0, 1e-6, 1e-3, 1.0]))
def test_standardised_branches_norm_at_most_n(g, data, eps_num):
    n = len(g)
    k = data.draw(st.integers(2, n))
    for raw in (E.dr_grpo(g), E.sloo_minus_one(g, k)):
        z, _ = E.standardize(raw, eps_num)
        assert float(z @ z) <= n * (1 + 1e-12)


@settings(max_examples=100, deadline=None)
@given(groups, st.data())
def test_phase_mix_endpoints_and_skip(g, data):
    n = len(g)
    k = data.draw(st.integers(2, n))
    eps = 1e-6
    at0 = E.phase_mix(g, k, 0.0, eps_num=eps)
    zg, sg = E.standardize(E.dr_grpo(g), eps)
    if sg < 1e-8:
        assert isinstance(at0, E.Skip)
    else:
        assert not isinstance(at0, E.Skip)
        np.testing.assert_allclose(at0, zg, atol=1e-12)
        np.testing.assert_allclose(at0, E.grpo(g, eps=eps), atol=1e-12)
    at1 = E.phase_mix(g, k, 1.0, eps_num=eps)
    zk, sk = E.standardize(E.sloo_minus_one(g, k), eps)
    if sk < 1e-8:
        assert isinstance(at1, E.Skip)
    else:
        np.testing.assert_allclose(at1, zk, atol=1e-12)


def test_all_fail_group_skips():
    out = E.phase_mix([-1.0] * 6, 2, 0.3)
    assert isinstance(out, E.Skip) and "collapsed" in out.reason
    # A collapsed branch with zero weight skips only when asked to.
    g = [0.0, 0.0, 0.0, 1.0]  # SLOO with k = 4: only the argmax gets 1 -> not collapsed
    assert not isinstance(E.phase_mix(g, 4, 0.0), E.Skip)
    g2 = [0.0, 1.0, 1.0]  # k = 3: the tied maxima never win strictly -> SLOO all zero
    assert not isinstance(E.phase_mix(g2, 3, 0.0), E.Skip)
    assert isinstance(E.phase_mix(g2, 3, 0.0, skip_unused_branch=True), E.Skip)
    assert isinstance(E.phase_mix(g2, 3, 0.5), E.Skip)


# ---------- exact unbiasedness on a small categorical policy ----------

THETA = np.array([0.3, -0.2, 0.5])
TABLE = np.array([2.0, -1.0, 4.0])


def _probs(theta):
    e = np.exp(theta - theta.max())
    return e / e.sum()


def _expected_grad(estimator, n):
    p = _probs(THETA)
    total = np.zeros(3)
    for xs in itertools.product(range(3), repeat=n):
        prob = float(np.prod(p[list(xs)]))
        adv = estimator(TABLE[list(xs)])
        for a, x in zip(adv, xs, strict=True):
            total += prob * a * (np.eye(3)[x] - p)
    return total


def _max_at_k(theta, k):
    p = _probs(theta)
    order = np.argsort(TABLE)
    cdf = np.cumsum(p[order])
    prev = np.concatenate([[0.0], cdf[:-1]])
    return float(np.sum(TABLE[order] * (cdf**k - prev**k)))


def _fd_grad(f):
    h = 1e-6
    return np.array([(f(THETA + h * np.eye(3)[i]) - f(THETA - h * np.eye(3)[i])) / (2 * h) for i in range(3)])


@pytest.mark.parametrize("n", [2, 4])
def test_unbiased_mean_estimators(n):
    grad_mean = _fd_grad(lambda t: float(_probs(t) @ TABLE))
    np.testing.assert_allclose(_expected_grad(E.rloo, n), n * grad_mean, atol=1e-8)
    np.testing.assert_allclose(_expected_grad(E.dr_grpo, n), (n - 1) * grad_mean, atol=1e-8)


@pytest.mark.parametrize(("n", "k"), [(2, 2), (4, 2), (4, 3), (4, 4), (5, 3)])
def test_unbiased_max_at_k_estimators(n, k):
    target = _fd_grad(lambda t: _max_at_k(t, k))
    np.testing.assert_allclose(_expected_grad(lambda r: E.sloo_minus_one(r, k), n), target, atol=1e-8)
    np.testing.assert_allclose(_expected_grad(lambda r: E.pkpo(r, k), n), target, atol=1e-8)


def test_registry_dispatch():
    r = [0.0, 1.0, 3.0]
    np.testing.assert_array_equal(E.compute_advantages("sloo_minus_one", r, k=2), E.sloo_minus_one(r, 2))
    assert set(E.ESTIMATORS) >= {"grpo", "dr_grpo", "rloo", "entropic", "pkpo", "sloo_minus_one", "phase_mix"}
