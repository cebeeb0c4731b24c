"""Trusted scorer of the Multi-Evolve family (protein fitness extrapolation, PACEvolve protocol).

Combined score: 0.7 x mean Pearson r + 0.3 x mean top-5 % precision over the assays; the
protocol and the exact definitions are in ``environments/multi_evolve/README.md``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from harness.envs.secret import heldout_seed
from harness.envs.subset import subset_of, unit_indices
from harness.evaluation.errors import CandidateInvalid
from harness.evaluation.result import CaseRecord
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer, require_finite

from .data import Assay, load_assays, synthetic_assays

ENTRY = "predict"
"""Function of the sandbox driver that builds the DataFrames and calls fit_and_predict."""


def top_k(n: int, fraction: float) -> int:
    """Size of the top set for ``n`` rows: ``max(1, ceil(fraction * n))``.

    For the default fraction 0.05 this is computed in integers as ``ceil(n / 20)``, which equals
    the reference's floating-point ``ceil(n * 0.05)`` for every n below 200,000 and cannot be
    thrown off by rounding above that.
    """
    if n <= 0:
        return 0
    if fraction == 0.05:
        return max(1, (n + 19) // 20)
    return max(1, math.ceil(fraction * n))


def _std_below(x: np.ndarray, eps: float) -> tuple[bool, np.ndarray]:
    """Whether ``std(x) < eps``, computed without overflow; also returns x centred and rescaled."""
    scale = float(np.max(np.abs(x))) if x.size else 0.0
    if scale == 0.0:
        return True, np.zeros_like(x)
    z = x / scale
    z = z - z.mean()
    return bool(np.sqrt(np.mean(z * z)) < eps / scale), z


def pearson_r(truth: np.ndarray, pred: np.ndarray, eps: float = 1e-12) -> float:
    """Pearson correlation, defined as 0 when either vector is (numerically) constant.

    Both inputs must be finite 1-D float arrays of the same length. Inputs are rescaled before
    centring, so finite predictions of any magnitude give a finite result in [-1, 1].
    """
    if truth.size < 2:
        return 0.0
    flat_t, zt = _std_below(np.asarray(truth, dtype=np.float64), eps)
    flat_p, zp = _std_below(np.asarray(pred, dtype=np.float64), eps)
    if flat_t or flat_p:
        return 0.0
    denom = math.sqrt(float(zt @ zt)) * math.sqrt(float(zp @ zp))
    if denom == 0.0:
        return 0.0
    r = float(zt @ zp) / denom
    return min(1.0, max(-1.0, r)) if math.isfinite(r) else 0.0


def top_order(values: np.ndarray) -> np.ndarray:
    """Row indices by decreasing value, ties by increasing row index."""
    return np.lexsort((np.arange(values.size), -values))


def top_precision(truth: np.ndarray, pred: np.ndarray, fraction: float = 0.05) -> float:
    """Share of the k truly best rows that are also among the k best-predicted rows (k = top_k)."""
    k = top_k(truth.size, fraction)
    if k == 0:
        return 0.0
    best = set(top_order(truth)[:k].tolist())
    picked = set(top_order(pred)[:k].tolist())
    return len(best & picked) / k


def validate_predictions(value: Any, n: int) -> np.ndarray:
    """Check what the candidate returned: one finite real number per test row.

    Rules (each failure message starts with ``rule '<name>'``): ``types`` (a numeric array,
    tensor, or list/tuple of int/float; no bools, strings or nesting), ``shape`` (one dimension),
    ``length`` (exactly one value per test row), ``finite`` (no NaN or infinity).

    Returns:
        The predictions as a float64 array.

    Raises:
        CandidateInvalid: On the first broken rule.
    """
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    if isinstance(value, list | tuple):
        for v in value:
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise CandidateInvalid(
                    f"rule 'types': predictions must be numbers, found a {type(v).__name__}"
                )
        try:
            value = np.asarray(value, dtype=np.float64)
        except OverflowError as e:  # a Python int beyond float range
            raise CandidateInvalid("rule 'finite': a prediction is too large for a float") from e
    if not isinstance(value, np.ndarray):
        raise CandidateInvalid(
            f"rule 'types': expected a 1-D numeric array or list of numbers, got a {type(value).__name__}"
        )
    if value.dtype.kind not in "iuf":
        raise CandidateInvalid(
            f"rule 'types': predictions have dtype {value.dtype}, expected a real number type"
        )
    if value.ndim != 1:
        raise CandidateInvalid(f"rule 'shape': predictions have shape {value.shape}, expected ({n},)")
    if value.shape[0] != n:
        raise CandidateInvalid(f"rule 'length': {value.shape[0]} predictions for {n} test rows")
    out = value.astype(np.float64)
    bad_rows = np.flatnonzero(~np.isfinite(out))
    if bad_rows.size:
        raise CandidateInvalid(
            f"rule 'finite': {bad_rows.size} predictions are NaN or infinite "
            f"(first at row {int(bad_rows[0])})"
        )
    return out


class MultiEvolveScorer(Scorer):
    """Fit on wild type / singles / doubles, predict 3-10-fold mutants; Pearson r and top-5 % precision.

    Parameters (``variant.scorer_params``): ``r_weight`` [0.7], ``precision_weight`` [0.3],
    ``top_fraction`` [0.05], ``pearson_eps`` [1e-12], split bounds ``max_train_mutations`` [2],
    ``min_test_mutations`` [3], ``max_test_mutations`` [10]; ``synthetic`` (bool) with the keys of
    :func:`data.synthetic_table`, otherwise the variant's ``data`` sources are the assay tables,
    scored in the order listed; ``subset`` (a validation subset of the assays, each scored whole;
    per-assay metrics keep the assay's index in the full list; adds the metric ``subset_size``).
    """

    assays: list[Assay]

    def prepare(self) -> None:
        """Load and split the assays (fetched tables, or the synthetic landscapes).

        Raises:
            DataMissingError: A table has not been fetched (names ``bench data fetch multi_evolve``).
            ValueError: The parameters or a table are unusable.
        """
        p = self.params
        self.r_weight = float(p.get("r_weight", 0.7))
        self.precision_weight = float(p.get("precision_weight", 0.3))
        self.top_fraction = float(p.get("top_fraction", 0.05))
        self.pearson_eps = float(p.get("pearson_eps", 1e-12))
        self.key_id: float | None = None
        if p.get("synthetic", False):
            # heldout = "secret": every landscape comes from the installation's key, so no
            # candidate can regenerate the withheld fitness from public code and the seed.
            seed, self.key_id = heldout_seed(p, "multi_evolve", int(p.get("seed", 0)))
            self.assays = synthetic_assays({**p, "seed": seed})
        else:
            files = [(key, source.filename) for key, source in self.variant.data]
            if not files:
                raise ValueError(f"{self.variant.id}: not synthetic and lists no data sources")
            self.assays = load_assays(self.data_dir, files, p)
        if not self.assays:
            raise ValueError(f"{self.variant.id}: no assays")

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Call the candidate once per assay and score its predictions against the withheld fitness."""
        chosen = unit_indices(len(self.assays), self.params)
        rs: list[float] = []
        precisions: list[float] = []
        seconds = 0.0
        metrics: dict[str, float] = {}
        cases: list[CaseRecord] = []
        for i in chosen:
            assay = self.assays[i]
            train = {k: (list(v) if isinstance(v, list) else np.array(v)) for k, v in assay.train.items()}
            test = {k: (list(v) if isinstance(v, list) else np.array(v)) for k, v in assay.test.items()}
            result = candidate.call_driver(ENTRY, train, test, dict(assay.context))
            seconds += float(result.seconds)
            pred = validate_predictions(result.value, assay.truth.size)
            r = pearson_r(assay.truth, pred, self.pearson_eps)
            prec = top_precision(assay.truth, pred, self.top_fraction)
            rs.append(r)
            precisions.append(prec)
            metrics[f"pearson_r_{i}"] = r
            metrics[f"precision_top5_{i}"] = prec
            cases.append(
                CaseRecord(
                    name=f"assay{i}",
                    status="ok",
                    score=self.r_weight * r + self.precision_weight * prec,
                    wall_seconds=float(result.seconds),
                    reason=f"pearson r {r:.4f}, top-5% precision {prec:.4f}; wall-clock seconds of the call",
                )
            )
        mean_r = require_finite("pearson_r", sum(rs) / len(rs))
        mean_p = require_finite("precision_top5", sum(precisions) / len(precisions))
        combined = require_finite("combined", self.r_weight * mean_r + self.precision_weight * mean_p)
        metrics.update(
            {"combined": combined, "pearson_r": mean_r, "precision_top5": mean_p, "fit_seconds": seconds}
        )
        if subset_of(self.params) is not None:
            metrics["subset_size"] = float(len(chosen))
        if self.key_id is not None:
            metrics["heldout_key"] = self.key_id
        return ScoreOutcome(score=combined, metrics=metrics, candidate_seconds=seconds, cases=cases)
