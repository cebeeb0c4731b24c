"""Trusted parameter fitting of an equation skeleton (LLM-SR's in-loop optimiser, made stricter).

The candidate's ``equation`` is a black box ``params -> predictions on the train inputs``. This
module fits ``params`` with ``scipy.optimize.minimize(method="BFGS")`` started from a constant
vector (1.0 everywhere, as in LLM-SR), on the **train** split only. Differences from the LLM-SR
reference, all fixed here and not candidate-controlled:

* The objective is the train NMSE (MSE divided by the train target variance), which has the same
  minimiser as the MSE but makes the gradient tolerance independent of the target's scale.
* Gradients are central ("3-point") finite differences and ``gtol`` is 1e-10 (scipy's default
  is 1e-5 with forward differences): with the looser default, BFGS stops far from the optimum
  and even the true oscillator skeletons only reach NMSE ~1e-6, so the benchmark's target
  (log10 NMSE -10) would be unreachable for the right answer.
* Work is capped by BFGS iterations (``max_iter``) and by equation calls (``max_calls``), so one
  evaluation has a bounded cost. Whatever stops the optimiser, the result is the best point
  evaluated so far (deterministic for a deterministic equation).
* A trial point whose predictions contain NaN / inf (e.g. ``exp`` overflowing during a line
  search) counts as an infinitely bad point, so the optimiser backs off; non-finite predictions
  at the starting point, or at the fitted point, make the candidate invalid.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import minimize  # imported with the scorer (prepare time), not on the first score

from harness.evaluation.errors import CandidateInvalid


@dataclass(frozen=True)
class FitSettings:
    """Fixed optimiser settings (scorer parameters of the variant)."""

    max_params: int = 10
    """Length of the ``params`` vector given to ``equation``."""
    init: float = 1.0
    """Starting value of every parameter."""
    gtol: float = 1e-10
    """BFGS stops when the largest gradient component of the train NMSE is below this."""
    max_iter: int = 150
    """Cap on BFGS iterations."""
    max_calls: int = 3000
    """Cap on ``equation`` calls during the fit (gradient probes included)."""
    fd_scheme: str = "3-point"
    """Finite-difference scheme of the gradient (``2-point`` or ``3-point``)."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> FitSettings:
        """Read the settings from scorer parameters (missing keys keep their defaults).

        Raises:
            ValueError: If a setting is out of range.
        """
        s = cls(
            max_params=int(params.get("max_params", cls.max_params)),
            init=float(params.get("param_init", cls.init)),
            gtol=float(params.get("gtol", cls.gtol)),
            max_iter=int(params.get("max_iter", cls.max_iter)),
            max_calls=int(params.get("max_calls", cls.max_calls)),
            fd_scheme=str(params.get("fd_scheme", cls.fd_scheme)),
        )
        if s.max_params < 1 or s.max_iter < 1 or s.max_calls < 1 or not s.gtol > 0:
            raise ValueError(f"invalid fit settings: {s}")
        if s.fd_scheme not in ("2-point", "3-point"):
            raise ValueError(f"fd_scheme must be '2-point' or '3-point', got {s.fd_scheme!r}")
        return s


@dataclass(frozen=True)
class FitResult:
    """Outcome of one fit."""

    params: np.ndarray
    """Best parameter vector evaluated (float64, ``max_params`` entries)."""
    train_nmse: float
    """Train NMSE at ``params`` (finite)."""
    prediction: np.ndarray
    """The equation's train predictions at ``params``, as returned during the fit."""
    calls: int
    """Number of ``equation`` calls made."""
    iterations: int
    """BFGS iterations completed (0 if the optimiser was stopped by the call cap)."""
    stopped: str
    """Why the optimiser stopped: ``converged``, ``max-iter``, ``max-calls`` or ``no-progress``."""


class _CallBudgetReached(Exception):
    """Internal: the call cap was hit inside the optimiser."""


def nmse(prediction: np.ndarray, target: np.ndarray) -> float:
    """Mean squared error divided by the (population) variance of ``target``; inf on overflow."""
    with np.errstate(all="ignore"):
        err = prediction - target
        value = float(np.mean(err * err) / np.var(target))
    return value if np.isfinite(value) else float("inf")


def fit_parameters(
    predict: Callable[[np.ndarray], np.ndarray], target: np.ndarray, settings: FitSettings
) -> FitResult:
    """Fit the parameters of a black-box equation to ``target`` by BFGS on the NMSE.

    Args:
        predict: Maps a float64 parameter vector to a float64 prediction of ``target``'s shape
            (already checked for type and shape by the caller; may contain NaN / inf).
        target: Train targets.
        settings: Optimiser settings.

    Returns:
        The best point evaluated.

    Raises:
        CandidateInvalid: The predictions at the starting point are not finite.
        CandidateError, CandidateTimeout: Propagated from ``predict``.
    """
    calls = 0
    best: dict[str, Any] = {"nmse": float("inf"), "params": None, "prediction": None}

    def objective(p: np.ndarray) -> float:
        nonlocal calls
        if not np.isfinite(p).all():
            return float("inf")
        if calls >= settings.max_calls:
            raise _CallBudgetReached
        params = np.array(p, dtype=np.float64)
        prediction = predict(params)
        calls += 1
        finite = bool(np.isfinite(prediction).all())
        value = nmse(prediction, target) if finite else float("inf")
        if calls == 1 and not np.isfinite(value):
            what = "NaN or infinite predictions" if not finite else "a squared error that overflows"
            raise CandidateInvalid(
                f"rule 'finite': equation gives {what} on the train inputs at the starting parameters "
                f"(all {settings.init:g})"
            )
        if value < best["nmse"]:
            best.update(nmse=value, params=params, prediction=prediction)
        return value

    x0 = np.full(settings.max_params, settings.init, dtype=np.float64)
    iterations, stopped = 0, "converged"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = minimize(
                objective,
                x0,
                method="BFGS",
                jac=settings.fd_scheme,
                options={"maxiter": settings.max_iter, "gtol": settings.gtol},
            )
            iterations = int(res.nit)
            if res.status == 1:
                stopped = "max-iter"
            elif res.status != 0:
                stopped = "no-progress"  # line search failed: no further decrease can be found
        except _CallBudgetReached:
            stopped = "max-calls"
        except (ValueError, FloatingPointError, ZeroDivisionError, np.linalg.LinAlgError):
            stopped = "no-progress"  # numerical breakdown inside the optimiser: keep the best point
    if best["params"] is None:  # pragma: no cover - the first call either succeeds or raises
        raise CandidateInvalid("rule 'finite': the fit produced no finite point")
    return FitResult(
        params=best["params"],
        train_nmse=float(best["nmse"]),
        prediction=best["prediction"],
        calls=calls,
        iterations=iterations,
        stopped=stopped,
    )
