"""Group advantage estimators as pure functions of one group's rewards.

Every estimator takes a 1-D float array of rewards for one rollout group and returns a 1-D
float64 array of advantages of the same length. ``phase_mix`` (PACEvolve++ Eq. 4) may instead
return :class:`Skip`, a first-class "take no optimiser step" outcome; the trainer logs it.

Formulas follow the PACEvolve++ paper (GRPO with population std, Dr.GRPO, PKPO Eq. 2, SLOO k-1
Eq. 3, the phase mixture Eq. 4) and TTT-Discover (entropic leave-one-out advantage with an
adaptive inverse temperature). The PKPO and SLOO weights use the sorted-rank closed forms
(one sort plus a prefix/suffix pass) with exact integer binomials.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]

LN2 = math.log(2.0)


@dataclass(frozen=True)
class Skip:
    """The update must be skipped; ``reason`` says why (logged as ``skip_reason``)."""

    reason: str


def _rewards(rewards: ArrayLike, min_size: int = 1) -> FloatArray:
    """Validate and convert a group's rewards to a finite 1-D float64 array."""
    r = np.asarray(rewards, dtype=np.float64)
    if r.ndim != 1:
        raise ValueError(f"rewards must be a 1-D array, got shape {r.shape}")
    if r.size < min_size:
        raise ValueError(f"this estimator needs at least {min_size} rewards, got {r.size}")
    if not np.all(np.isfinite(r)):
        raise ValueError("rewards must be finite (map failures to the failure reward first)")
    return r


def _check_k(k: int, n: int, lo: int) -> None:
    if not isinstance(k, int | np.integer) or isinstance(k, bool):
        raise TypeError(f"k must be an integer, got {type(k).__name__}")
    if not lo <= k <= n:
        raise ValueError(f"k must satisfy {lo} <= k <= N = {n}, got k = {k}")


def grpo(rewards: ArrayLike, eps: float = 1e-6, ddof: int = 0) -> FloatArray:
    """GRPO advantage ``(r - mean) / (std + eps)``.

    Args:
        rewards: One group's rewards.
        eps: Added to the standard deviation (PACEvolve++'s eps_num).
        ddof: 0 for the population std (the paper's definition), 1 for Bessel's correction.

    Returns:
        The advantages.

    Raises:
        ValueError: If rewards are not a finite 1-D array, ``eps < 0`` or ``ddof`` is invalid.
    """
    if eps < 0:
        raise ValueError("eps must be non-negative")
    if ddof not in (0, 1):
        raise ValueError("ddof must be 0 or 1")
    r = _rewards(rewards, min_size=1 + ddof)
    centred = r - r.mean()
    std = float(np.sqrt(np.sum(centred * centred) / (r.size - ddof)))
    if std + eps == 0.0:
        return np.zeros_like(r)
    return centred / (std + eps)


def dr_grpo(rewards: ArrayLike) -> FloatArray:
    """Dr.GRPO / raw group-relative advantage ``r - mean``.

    Raises:
        ValueError: If rewards are not a finite non-empty 1-D array.
    """
    r = _rewards(rewards)
    return r - r.mean()


def rloo(rewards: ArrayLike) -> FloatArray:
    """REINFORCE leave-one-out advantage ``r_i - mean_{j != i} r_j``.

    Raises:
        ValueError: If there are fewer than 2 rewards or they are not finite.
    """
    r = _rewards(rewards, min_size=2)
    n = r.size
    return r - (r.sum() - r) / (n - 1)


def tilted_kl(rewards: ArrayLike, beta: float) -> float:
    """KL(q_beta || uniform) with ``q_beta ∝ exp(beta * r)``, computed in log space.

    Raises:
        ValueError: If rewards are not finite or ``beta`` is negative.
    """
    if beta < 0:
        raise ValueError("beta must be non-negative")
    r = _rewards(rewards)
    z = beta * (r - r.max())
    log_q = z - np.log(np.sum(np.exp(z)))
    q = np.exp(log_q)
    return float(np.sum(q * (log_q + math.log(r.size))))


def solve_beta(rewards: ArrayLike, gamma: float = LN2, max_fraction: float = 0.9, iters: int = 200) -> float:
    """Inverse temperature with KL(q_beta || uniform) = gamma, found by bracketing and bisection.

    KL is non-decreasing in beta with supremum ln(N / t), t the number of rewards tied at the
    maximum (within a relative 1e-9 of the reward range). When gamma is not below
    ``max_fraction`` of that supremum (always the case for
    N = 2 with gamma = ln 2) the target is lowered to ``max_fraction * ln(N / t)`` so beta stays
    finite and the advantages do not explode. A constant group returns 0.

    Args:
        rewards: One group's rewards.
        gamma: Target KL (TTT-Discover uses ln 2).
        max_fraction: Fraction of the reachable supremum used when gamma is out of reach.
        iters: Bisection steps.

    Returns:
        beta >= 0.

    Raises:
        ValueError: If gamma <= 0, max_fraction is not in (0, 1), or rewards are invalid.
    """
    if gamma <= 0:
        raise ValueError("gamma must be positive")
    if not 0.0 < max_fraction < 1.0:
        raise ValueError("max_fraction must lie in (0, 1)")
    r = _rewards(rewards, min_size=2)
    spread = float(r.max() - r.min())
    if spread == 0.0:
        return 0.0
    # Rewards within a relative 1e-9 of the maximum count as tied: separating them would need
    # a beta near the float limit, so the reachable supremum is judged with them merged.
    ties = int(np.sum(r >= r.max() - 1e-9 * spread))
    target = min(gamma, max_fraction * math.log(r.size / ties))
    # Work on the unit-range scale so the bracket does not depend on the reward scale.
    u = (r - r.min()) / spread
    hi = 1.0
    while tilted_kl(u, hi) < target:
        hi *= 2.0
        if hi > 1e12:  # unreachable in exact arithmetic: target < sup; guards float pathologies
            break
    lo = 0.0
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if tilted_kl(u, mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return 0.5 * (lo + hi) / spread


def entropic(
    rewards: ArrayLike,
    beta: float | None = None,
    gamma: float = LN2,
    eps: float = 1e-12,
    max_fraction: float = 0.9,
) -> FloatArray:
    """TTT-Discover leave-one-out entropic advantage ``e_i / (Z_{-i} + eps) - 1``.

    ``e_i = exp(beta (r_i - r_max))`` (never overflows: the exponent is <= 0) and
    ``Z_{-i}`` is the mean of the others' ``e``. With ``beta`` None it is chosen by
    :func:`solve_beta` so that KL(q_beta || uniform) = gamma; invariant to shifting and
    positive scaling of the rewards. A constant group gets exactly zero advantages.

    Args:
        rewards: One group's rewards (at least 2).
        beta: Fixed inverse temperature, or None for the adaptive choice.
        gamma: Target KL for the adaptive choice.
        eps: Added to ``Z_{-i}``.
        max_fraction: See :func:`solve_beta`.

    Returns:
        The advantages (finite for every finite input).

    Raises:
        ValueError: If rewards are invalid, beta is negative or eps is not positive.
    """
    if eps <= 0:
        raise ValueError("eps must be positive")
    r = _rewards(rewards, min_size=2)
    if r.max() == r.min():
        # A constant group carries no signal: exactly zero (e / (Z + eps) - 1 would be -eps), so
        # the trainer's all-zero skip fires, as the reference code drops such groups.
        return np.zeros(r.size, dtype=np.float64)
    if beta is None:
        beta = solve_beta(r, gamma=gamma, max_fraction=max_fraction)
    elif beta < 0 or not math.isfinite(beta):
        raise ValueError("beta must be finite and non-negative")
    with np.errstate(under="ignore"):
        e = np.exp(beta * (r - r.max()))
    z_others = (e.sum() - e) / (r.size - 1)
    z_others = np.maximum(z_others, 0.0)  # the subtraction may round below zero
    return np.asarray(e / (z_others + eps) - 1.0, dtype=np.float64)


def _rank_weights(n: int, k: int, m: int) -> FloatArray:
    """``C(i, m) / C(n, k)`` for 0-based rank i = 0..n-1, each correctly rounded (exact integers)."""
    denom = math.comb(n, k)
    out = np.zeros(n, dtype=np.float64)
    if m < 0:
        return out
    c = 1  # C(m, m)
    for i in range(m, n):
        out[i] = c / denom
        c = c * (i + 1) // (i + 1 - m)  # C(i+1, m) from C(i, m)
    return out


def pkpo(rewards: ArrayLike, k: int) -> FloatArray:
    """PKPO best-of-k weights (Eq. 2): ``w_i = C(N,k)^-1 * sum over k-subsets I ∋ i of max_I g``.

    Sorted ascending with 0-based rank i: ``w_(i) = [C(i,k-1) g_(i) + sum_{j>i} C(j-1,k-2) g_(j)] / C(N,k)``.

    Args:
        rewards: One group's rewards.
        k: Subset size, 1 <= k <= N.

    Returns:
        The weights (unbiased: E[sum_i w_i grad log p(x_i)] = grad E[max of k draws]).

    Raises:
        ValueError: If rewards are invalid or k is out of range.
        TypeError: If k is not an integer.
    """
    g = _rewards(rewards)
    n = g.size
    _check_k(k, n, 1)
    order = np.argsort(g, kind="stable")
    h = g[order]
    a = _rank_weights(n, k, k - 1)
    b = np.concatenate([[0.0], _rank_weights(n, k, k - 2)[:-1]])  # C(j-1, k-2) / C(N, k)
    bh = b * h
    suffix = np.concatenate([np.cumsum(bh[::-1])[::-1][1:], [0.0]])  # sum_{j>i} b_j h_j
    out = np.empty(n, dtype=np.float64)
    out[order] = a * h + suffix
    return out


def sloo_minus_one(rewards: ArrayLike, k: int) -> FloatArray:
    """PKPO SLOO k-1 advantage (Eq. 3): mean over k-subsets of the marginal gain of i over the rest.

    Sorted ascending with 0-based rank i: ``A_(i) = sum_{j<i} C(j,k-2) (h_i - h_j) / C(N,k)``,
    evaluated in O(N log N) as ``a_i h_i - prefix_i`` on rewards shifted to start at 0 (less
    cancellation). Ties are exact: a tied competitor contributes a zero margin.

    Args:
        rewards: One group's rewards.
        k: Subset size, 2 <= k <= N.

    Returns:
        Non-negative advantages; the k-1 lowest ranks get 0.

    Raises:
        ValueError: If rewards are invalid or k is out of range.
        TypeError: If k is not an integer.
    """
    g = _rewards(rewards, min_size=2)
    n = g.size
    _check_k(k, n, 2)
    order = np.argsort(g, kind="stable")
    h = g[order] - g[order[0]]
    a = _rank_weights(n, k, k - 1)
    b = _rank_weights(n, k, k - 2)
    prefix = np.concatenate([[0.0], np.cumsum(b * h)[:-1]])  # sum_{j<i} b_j h_j
    out = np.empty(n, dtype=np.float64)
    out[order] = np.maximum(a * h - prefix, 0.0)  # exact value is >= 0; clear rounding residue
    return out


def sloo_minus_one_direct(rewards: ArrayLike, k: int) -> FloatArray:
    """O(N^2) evaluation of SLOO k-1 by its margin sum (reference for tests and benchmarks).

    Raises:
        ValueError: If rewards are invalid or k is out of range.
        TypeError: If k is not an integer.
    """
    g = _rewards(rewards, min_size=2)
    n = g.size
    _check_k(k, n, 2)
    order = np.argsort(g, kind="stable")
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    b = _rank_weights(n, k, k - 2)[rank]  # weight of j as the best of the others
    lower = rank[None, :] < rank[:, None]  # [i, j]: j ranks below i
    margins = np.where(lower, g[:, None] - g[None, :], 0.0)
    return np.asarray(margins @ b, dtype=np.float64)


def standardize(values: ArrayLike, eps_num: float) -> tuple[FloatArray, float]:
    """Per-group standardisation ``(x - mean) / (std + eps_num)`` with the population std.

    Returns:
        The standardised vector (squared norm <= N) and the std before ``eps_num``.

    Raises:
        ValueError: If ``eps_num`` is negative or the values are not a 1-D array.
    """
    if eps_num < 0:
        raise ValueError("eps_num must be non-negative")
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("values must be a non-empty 1-D array")
    centred = x - x.mean()
    std = float(np.sqrt(np.mean(centred * centred)))
    if not math.isfinite(std) or std + eps_num == 0.0:
        return np.zeros_like(x), std
    return centred / (std + eps_num), std


def phase_mix(
    rewards: ArrayLike,
    k: int,
    alpha: float,
    eps_num: float = 1e-6,
    eps_skip: float = 1e-8,
    skip_unused_branch: bool = False,
) -> FloatArray | Skip:
    """PACEvolve++ phase-adaptive mixture (Eq. 4) of standardised Dr.GRPO and SLOO k-1 branches.

    ``A = (1 - alpha) * Phi(r - mean r) + alpha * Phi(sloo_minus_one(r, k))``. A branch whose
    std is non-finite or below ``eps_skip`` has collapsed; if its weight is non-zero (or
    ``skip_unused_branch`` is set) the update is skipped.

    Args:
        rewards: One group's rewards.
        k: SLOO subset size, 2 <= k <= N.
        alpha: Mixture weight in [0, 1] (linear 0 -> 1 over training in the paper).
        eps_num: Added to each branch's std.
        eps_skip: Collapse threshold on each branch's std.
        skip_unused_branch: Also skip when a branch with zero weight collapsed.

    Returns:
        The mixed advantages, or :class:`Skip`.

    Raises:
        ValueError: If alpha is outside [0, 1], thresholds are negative, or rewards/k are invalid.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if eps_skip < 0:
        raise ValueError("eps_skip must be non-negative")
    r = _rewards(rewards, min_size=2)
    branches = (("group", dr_grpo(r), 1.0 - alpha), ("topk", sloo_minus_one(r, k), alpha))
    out = np.zeros_like(r)
    for name, raw, weight in branches:
        z, std = standardize(raw, eps_num)
        if (weight > 0 or skip_unused_branch) and (not math.isfinite(std) or std < eps_skip):
            return Skip(f"{name} branch collapsed (std={std:.3g} < eps_skip={eps_skip:g})")
        out += weight * z
    return out


Estimator = Callable[..., "FloatArray | Skip"]

ESTIMATORS: dict[str, Estimator] = {
    "grpo": grpo,
    "dr_grpo": dr_grpo,
    "rloo": rloo,
    "entropic": entropic,
    "pkpo": pkpo,
    "sloo_minus_one": sloo_minus_one,
    "phase_mix": phase_mix,
}


def compute_advantages(name: str, rewards: ArrayLike, **params: Any) -> FloatArray | Skip:
    """Dispatch to the estimator registered under ``name``.

    Raises:
        KeyError: If ``name`` is not a registered estimator.
        ValueError: If the estimator rejects its inputs.
        TypeError: If ``params`` do not match the estimator's signature.
    """
    try:
        fn = ESTIMATORS[name]
    except KeyError:
        raise KeyError(f"unknown estimator {name!r}; choose one of {sorted(ESTIMATORS)}") from None
    return fn(rewards, **params)
