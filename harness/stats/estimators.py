"""Small, pure estimators for comparing search methods across seeds.

All functions take plain sequences (or numpy arrays) of finite floats, never mutate their
inputs and are deterministic given their ``seed``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

FloatArray = NDArray[np.float64]
"""A 1-D float64 array."""

Statistic = Callable[[FloatArray], Any]
"""A statistic of one 1-D sample, returning something convertible to float."""


def as_finite_1d(values: ArrayLike, name: str = "values") -> FloatArray:
    """Convert to a 1-D float64 array of finite values.

    Raises:
        ValueError: If the input is not one-dimensional or holds NaN / infinities.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {x.shape}")
    if not np.all(np.isfinite(x)):
        raise ValueError(f"{name} must be finite")
    return x


def mean_sem(values: ArrayLike) -> tuple[float, float]:
    """Sample mean and standard error of the mean.

    SEM = s / sqrt(n) with the sample standard deviation s (ddof = 1).

    Args:
        values: 1-D finite values.

    Returns:
        ``(mean, sem)``; the SEM is NaN when n < 2, and both are NaN when n = 0.

    Raises:
        ValueError: If ``values`` is not 1-D or holds non-finite values.
    """
    x = as_finite_1d(values)
    n = x.size
    if n == 0:
        return math.nan, math.nan
    mean = float(np.mean(x))
    if n < 2:
        return mean, math.nan
    return mean, float(np.std(x, ddof=1) / math.sqrt(n))


def _check_level(level: float, n_boot: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be positive, got {n_boot}")


def bootstrap_ci(
    values: ArrayLike,
    stat: Statistic = np.mean,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap confidence interval of a statistic.

    Resamples ``values`` with replacement ``n_boot`` times (numpy ``default_rng(seed)``) and
    returns the ``(1 - level) / 2`` and ``(1 + level) / 2`` quantiles of the statistic. A
    constant sample gives the degenerate interval ``(stat(values), stat(values))``.

    Args:
        values: 1-D finite values (at least one).
        stat: Statistic of a 1-D sample.
        level: Confidence level in (0, 1).
        n_boot: Number of bootstrap resamples.
        seed: Seed of the resampling generator.

    Returns:
        ``(lo, hi)`` with ``lo <= hi``.

    Raises:
        ValueError: If ``values`` is empty, not 1-D or non-finite, or ``level`` / ``n_boot`` is
            out of range.
    """
    _check_level(level, n_boot)
    x = as_finite_1d(values)
    if x.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    if np.all(x == x[0]):  # every resample equals the sample
        point = float(stat(x))
        return point, point
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, x.size, size=(n_boot, x.size))
    if stat is np.mean:
        stats = x[idx].mean(axis=1)
    else:
        stats = np.array([float(stat(x[row])) for row in idx], dtype=np.float64)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


class DeltaCI(NamedTuple):
    """A paired difference between two methods with its bootstrap confidence interval."""

    delta: float
    """The statistic of the per-seed differences ``a - b`` (the mean by default)."""
    lo: float
    """Lower confidence bound."""
    hi: float
    """Upper confidence bound."""
    n: int
    """Number of matched pairs."""


def _pair(
    a: Mapping[Any, float] | ArrayLike, b: Mapping[Any, float] | ArrayLike
) -> tuple[FloatArray, FloatArray]:
    """Align two result sets by seed (mappings) or by position (sequences).

    Raises:
        TypeError: If one input is a mapping and the other is not.
        ValueError: If sequences differ in length or mappings share no seed.
    """
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        if not (isinstance(a, Mapping) and isinstance(b, Mapping)):
            raise TypeError("pass both results as seed -> value mappings, or both as sequences")
        shared = set(a) & set(b)
        try:
            common = sorted(shared)
        except TypeError:  # incomparable seed keys: any fixed order will do
            common = sorted(shared, key=repr)
        if not common:
            raise ValueError("the two methods share no seed")
        return as_finite_1d([a[k] for k in common], "a"), as_finite_1d([b[k] for k in common], "b")
    xa, xb = as_finite_1d(a, "a"), as_finite_1d(b, "b")
    if xa.size != xb.size:
        raise ValueError(f"paired samples differ in length: {xa.size} != {xb.size}")
    return xa, xb


def paired_bootstrap_delta(
    a: Mapping[Any, float] | ArrayLike,
    b: Mapping[Any, float] | ArrayLike,
    stat: Statistic = np.mean,
    level: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> DeltaCI:
    """Difference between two methods run on the same seeds, with a paired bootstrap CI.

    The per-seed differences ``a[s] - b[s]`` are resampled as pairs, which removes the
    seed-to-seed variance both methods share.

    Args:
        a: Results of method A: a seed -> value mapping (matched on common seeds) or a
            sequence aligned with ``b``.
        b: Results of method B, in the same form as ``a``.
        stat: Statistic of the differences (the mean by default).
        level: Confidence level in (0, 1).
        n_boot: Number of bootstrap resamples.
        seed: Seed of the resampling generator.

    Returns:
        The difference statistic, its interval and the number of pairs.

    Raises:
        TypeError: If one input is a mapping and the other is not.
        ValueError: If there are no pairs, lengths differ, values are non-finite, or
            ``level`` / ``n_boot`` is out of range.
    """
    xa, xb = _pair(a, b)
    if xa.size == 0:
        raise ValueError("paired_bootstrap_delta needs at least one pair")
    d = xa - xb
    lo, hi = bootstrap_ci(d, stat=stat, level=level, n_boot=n_boot, seed=seed)
    return DeltaCI(delta=float(stat(d)), lo=lo, hi=hi, n=int(d.size))


def holm_bonferroni(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni step-down adjustment for multiple comparisons.

    With the p-values sorted ascending, p_(1) <= ... <= p_(m), the adjusted values are
    ``min(1, max_{j <= i} (m - j + 1) * p_(j))``, returned in the input order. Rejecting where
    the adjusted value is <= alpha controls the family-wise error rate at alpha.

    Args:
        pvalues: Raw p-values in [0, 1].

    Returns:
        Adjusted p-values, same order and length as the input.

    Raises:
        ValueError: If a p-value is outside [0, 1] or NaN, or the input is not 1-D.
    """
    p = np.asarray(pvalues, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError("pvalues must be one-dimensional")
    if p.size and not (np.all(p >= 0.0) and np.all(p <= 1.0)):
        raise ValueError("p-values must lie in [0, 1]")
    m = p.size
    order = np.argsort(p, kind="stable")
    scaled = (m - np.arange(m)) * p[order]
    adjusted_sorted = np.minimum(1.0, np.maximum.accumulate(scaled))
    out = np.empty(m, dtype=np.float64)
    out[order] = adjusted_sorted
    return [float(v) for v in out]
