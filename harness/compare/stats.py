"""Statistics for comparing two or more search methods over seeds and variants.

Paired per-variant inference (bootstrap CI of the mean seed-wise difference, sign-flip
permutation test) and the aggregate metrics of Agarwal et al. (2021), "Deep RL at the edge of
the statistical precipice": interquartile mean with stratified bootstrap CIs and the
probability of improvement. Everything is vectorised over resamples; nothing loops over values.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from harness.stats.estimators import as_finite_1d

FloatArray = NDArray[np.float64]
CIMethod = Literal["BCa", "percentile", "degenerate", "none"]

EXACT_PERMUTATION_MAX_N = 16
"""Up to this many pairs the permutation test enumerates all 2**n sign flips exactly."""


def _check_level(level: float, n_resamples: int) -> None:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be positive, got {n_resamples}")


class Interval(NamedTuple):
    """A point estimate with its confidence interval."""

    estimate: float
    """The statistic on the observed data."""
    lo: float
    """Lower bound (NaN when no interval can be formed)."""
    hi: float
    """Upper bound (NaN when no interval can be formed)."""
    method: CIMethod
    """How the interval was formed."""


def mean_ci(values: ArrayLike, level: float = 0.95, n_resamples: int = 4000, seed: int = 0) -> Interval:
    """Bootstrap CI of a mean (BCa where it applies, else percentile).

    BCa needs at least 3 values and a non-degenerate jackknife; with 2 values the percentile
    interval is used, with 1 value there is no interval, and a constant sample gives the
    degenerate interval at its value.

    Args:
        values: 1-D finite sample (e.g. per-seed differences).
        level: Confidence level in (0, 1).
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling generator.

    Returns:
        The mean with its interval.

    Raises:
        ValueError: If ``values`` is empty, not 1-D or not finite, or ``level`` is out of range.
    """
    _check_level(level, n_resamples)
    x = as_finite_1d(values, "values")
    if x.size == 0:
        raise ValueError("mean_ci needs at least one value")
    est = float(x.mean())
    if x.size == 1:
        return Interval(est, math.nan, math.nan, "none")
    if np.all(x == x[0]):
        return Interval(est, est, est, "degenerate")
    from scipy import stats as sps  # here, not at import: ~0.7 s off every ``bench`` start

    rng = np.random.default_rng(seed)
    for method in ("BCa", "percentile") if x.size >= 3 else ("percentile",):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # scipy warns on degenerate BCa; we fall back below
            res = sps.bootstrap(
                (x,),
                np.mean,
                n_resamples=n_resamples,
                confidence_level=level,
                method=method,
                vectorized=True,
                rng=rng,
            )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
        if math.isfinite(lo) and math.isfinite(hi):
            return Interval(est, min(lo, hi), max(lo, hi), method)
    return Interval(est, math.nan, math.nan, "none")


def sign_flip_pvalue(diffs: ArrayLike, n_resamples: int = 20000, seed: int = 0) -> float:
    """Two-sided paired permutation test of a zero mean difference (random sign flips).

    Under H0 (A and B exchangeable within each seed) every difference is equally likely to have
    either sign. Up to :data:`EXACT_PERMUTATION_MAX_N` pairs all ``2**n`` flips are enumerated and
    the p-value is exact; beyond that ``n_resamples`` random flips give the Monte Carlo p-value
    ``(1 + #{|mean*| >= |mean|}) / (1 + n_resamples)``, which is never 0.

    Args:
        diffs: Per-seed differences ``a - b``.
        n_resamples: Random flips when the exact test is too large.
        seed: Seed of the flip generator.

    Returns:
        The p-value in (0, 1] (1.0 for an empty input or all-zero differences).

    Raises:
        ValueError: If ``diffs`` is not 1-D and finite or ``n_resamples`` < 1.
    """
    d = as_finite_1d(diffs, "diffs")
    if n_resamples < 1:
        raise ValueError("n_resamples must be positive")
    n = d.size
    if n == 0 or not np.any(d):
        return 1.0
    observed = abs(d.mean())
    tol = 1e-12 * max(1.0, float(np.abs(d).max()))  # ties in floating point count as extreme
    if n <= EXACT_PERMUTATION_MAX_N:
        codes = np.arange(2**n, dtype=np.int64)[:, None]
        signs = 1.0 - 2.0 * ((codes >> np.arange(n)) & 1)
        means = np.abs(signs @ d) / n
        return float(np.mean(means >= observed - tol))
    rng = np.random.default_rng(seed)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_resamples, n))
    hits = int(np.sum(np.abs(signs @ d) / n >= observed - tol))
    return (1 + hits) / (1 + n_resamples)


def iqm(values: ArrayLike, axis: int = -1) -> FloatArray | float:
    """Interquartile mean: the mean of the middle 50 % (``scipy.stats.trim_mean(x, 0.25)``).

    Raises:
        ValueError: If ``values`` is empty or not finite.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError("iqm needs a non-empty finite sample")
    from scipy import stats as sps

    out = sps.trim_mean(x, 0.25, axis=axis)
    return float(out) if np.ndim(out) == 0 else np.asarray(out, dtype=np.float64)


def _strata(scores: Mapping[str, ArrayLike], name: str) -> dict[str, FloatArray]:
    out = {k: as_finite_1d(v, f"{name}[{k!r}]") for k, v in scores.items()}
    if not out or any(v.size == 0 for v in out.values()):
        raise ValueError(f"{name} needs at least one value in every task")
    return out


def _resample(x: FloatArray, n_resamples: int, rng: np.random.Generator) -> FloatArray:
    return x[rng.integers(0, x.size, size=(n_resamples, x.size))]


def _percentile(est: float, boot: FloatArray, level: float) -> Interval:
    a = (1.0 - level) / 2.0
    lo, hi = np.quantile(boot, [a, 1.0 - a])
    return Interval(est, float(lo), float(hi), "percentile")


def stratified_iqm(
    scores: Mapping[str, ArrayLike], level: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> Interval:
    """IQM of one method's scores pooled over tasks, with a stratified bootstrap CI.

    Runs are resampled with replacement within each task (stratum), so every resample keeps
    each task's number of runs; the percentile interval of the resampled IQMs is returned.

    Args:
        scores: Task (variant) -> that method's per-run scores.
        level: Confidence level.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling generator.

    Returns:
        The pooled IQM and its interval.

    Raises:
        ValueError: If a task has no scores, a score is not finite, or ``level`` is out of range.
    """
    _check_level(level, n_resamples)
    s = _strata(scores, "scores")
    est = float(iqm(np.concatenate(list(s.values()))))
    rng = np.random.default_rng(seed)
    boot = np.concatenate([_resample(v, n_resamples, rng) for v in s.values()], axis=1)
    return _percentile(est, np.asarray(iqm(boot, axis=1)), level)


def _poi_task(x: FloatArray, y: FloatArray) -> FloatArray:
    """P(X > Y) + P(X = Y) / 2 for each resample row of ``x`` (B, n) and ``y`` (B, m).

    Computed as the Mann-Whitney U of X over n * m: with average ranks in the pooled sample,
    ``U = sum(ranks of X) - n (n + 1) / 2`` counts every tie as one half (O((n + m) log) per row).
    """
    from scipy import stats as sps

    n, m = x.shape[1], y.shape[1]
    ranks = sps.rankdata(np.concatenate([x, y], axis=1), axis=1)
    u = ranks[:, :n].sum(axis=1) - n * (n + 1) / 2.0
    return np.asarray(u / (n * m), dtype=np.float64)


def probability_of_improvement(
    a: Mapping[str, ArrayLike],
    b: Mapping[str, ArrayLike],
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Probability that a run of A beats a run of B on a random task, with a stratified bootstrap CI.

    Per task this is the Mann-Whitney statistic ``P(X_A > X_B) + P(X_A = X_B) / 2``; the result
    is its average over the tasks both methods ran. Higher scores are better (pass normalised
    progress, not raw scores of minimised objectives).

    Args:
        a: Task -> per-run scores of A.
        b: Task -> per-run scores of B (same tasks as ``a``).
        level: Confidence level.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling generator.

    Returns:
        The probability and its interval.

    Raises:
        ValueError: If the task sets differ, a task has no scores or a score is not finite.
    """
    _check_level(level, n_resamples)
    sa, sb = _strata(a, "a"), _strata(b, "b")
    if set(sa) != set(sb):
        raise ValueError(f"tasks differ: {sorted(set(sa) ^ set(sb))}")
    tasks = sorted(sa)
    est = float(np.mean([_poi_task(sa[t][None, :], sb[t][None, :])[0] for t in tasks]))
    rng = np.random.default_rng(seed)
    boot = np.mean(
        [_poi_task(_resample(sa[t], n_resamples, rng), _resample(sb[t], n_resamples, rng)) for t in tasks],
        axis=0,
    )
    return _percentile(est, boot, level)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm step-down adjusted p-values, NaN entries passed through and not counted.

    Raises:
        ValueError: If a p-value is outside [0, 1].
    """
    from harness.stats.estimators import holm_bonferroni

    p = np.asarray(pvalues, dtype=np.float64)
    ok = ~np.isnan(p)
    out = np.full(p.shape, math.nan)
    out[ok] = holm_bonferroni(p[ok].tolist())
    return [float(v) for v in out]
