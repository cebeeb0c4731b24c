"""Trusted parameter fitting of an equation skeleton: the published protocol and a strong fit.

The candidate's ``equation`` is a black box ``params -> predictions on the train inputs``; both
fits run here, on the **train** split only, from a constant start vector (1.0 everywhere, as in
LLM-SR). Nothing about the optimiser is candidate-controlled.

**Published protocol** (:func:`fit_published`, the family's default since version 2). Exactly the
in-loop fit of LLM-SR (``scipy.optimize.minimize(loss, [1.0] * 10, method="BFGS")`` with scipy's
defaults: forward-difference gradients with absolute step ~1.5e-8, ``gtol`` 1e-5, at most
200 * 10 iterations) on the train **MSE**; the parameters are ``result.x``, and a NaN or infinite
train MSE there is a failure. This is the fit behind the published LLM-SR, OpenEvolve and
PACEvolve tables, so scores line up with them: the true oscillator1 skeleton only reaches
log10 NMSE ~ -5.6 (in-domain) because BFGS stops early at the loose default tolerance. The
optimiser sees the raw MSE, NaN and inf included, as in the reference. One deviation, for a
bounded cost: a cap on equation calls (``published_max_calls``, far above what a normal fit
needs); a fit stopped by it keeps the best finite point evaluated.

**Strong fit** (:func:`fit_parameters`, version 1's default, now optional). Differences from the
published protocol:

* The objective is the train NMSE (MSE divided by the train target variance), which has the same
  minimiser as the MSE but makes the gradient tolerance independent of the target's scale.
* Gradients are central ("3-point") finite differences and ``gtol`` is 1e-10: with the looser
  default, BFGS stops far from the optimum and even the true oscillator skeletons only reach
  NMSE ~1e-6; this fit takes them to ~1e-22.
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
    """Settings of the strong fit (scorer parameters of the variant)."""

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
    """The strong fit: BFGS on the NMSE with central differences and a tight tolerance.

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


@dataclass(frozen=True)
class PublishedFitSettings:
    """Settings of the published protocol (everything else is scipy's default)."""

    max_params: int = 10
    """Length of the ``params`` vector given to ``equation``."""
    init: float = 1.0
    """Starting value of every parameter."""
    max_calls: int = 20000
    """Safety cap on ``equation`` calls (not in the reference; a normal fit needs a few hundred)."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> PublishedFitSettings:
        """Read the settings from scorer parameters (``max_params``, ``param_init``, ``published_max_calls``).

        Raises:
            ValueError: If a setting is out of range.
        """
        s = cls(
            max_params=int(params.get("max_params", cls.max_params)),
            init=float(params.get("param_init", cls.init)),
            max_calls=int(params.get("published_max_calls", cls.max_calls)),
        )
        if s.max_params < 1 or s.max_calls < 1:
            raise ValueError(f"invalid published-fit settings: {s}")
        return s


def mse(prediction: np.ndarray, target: np.ndarray) -> float:
    """``mean((prediction - target) ** 2)`` as the reference computes it (NaN / inf pass through)."""
    with np.errstate(all="ignore"):
        return float(np.mean((prediction - target) ** 2))


def fit_published(
    predict: Callable[[np.ndarray], np.ndarray], target: np.ndarray, settings: PublishedFitSettings
) -> FitResult:
    """The published protocol: scipy BFGS with default options on the train MSE, result ``x`` kept.

    Args:
        predict: Maps a float64 parameter vector to a float64 prediction of ``target``'s shape
            (already checked for type and shape by the caller; may contain NaN / inf).
        target: Train targets.
        settings: Start value, parameter count and the call cap.

    Returns:
        The fit at scipy's ``result.x`` (or, if the call cap stopped it, the best finite point).

    Raises:
        CandidateInvalid: The train MSE is not finite at the starting or at the fitted parameters.
        CandidateError, CandidateTimeout: Propagated from ``predict``.
    """
    calls = 0
    last: dict[str, Any] = {"params": None, "prediction": None}
    best: dict[str, Any] = {"mse": float("inf"), "params": None, "prediction": None}

    def objective(p: np.ndarray) -> float:
        nonlocal calls
        if calls >= settings.max_calls:
            raise _CallBudgetReached
        params = np.array(p, dtype=np.float64)
        prediction = predict(params)
        calls += 1
        value = mse(prediction, target)
        if calls == 1 and not np.isfinite(value):
            raise CandidateInvalid(
                "rule 'finite': the train MSE of equation at the starting parameters "
                f"(all {settings.init:g}) is NaN or infinite"
            )
        last.update(params=params, prediction=prediction)
        if value < best["mse"]:
            best.update(mse=value, params=params, prediction=prediction)
        return value

    x0 = np.full(settings.max_params, settings.init, dtype=np.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            res = minimize(objective, x0, method="BFGS")
        except _CallBudgetReached:
            res = None
    if res is None:
        params, prediction, iterations, stopped = best["params"], best["prediction"], 0, "max-calls"
    else:
        params = np.array(res.x, dtype=np.float64)
        iterations = int(res.nit)
        stopped = {0: "converged", 1: "max-iter"}.get(int(res.status), "no-progress")
        if last["params"] is not None and np.array_equal(last["params"], params):
            prediction = last["prediction"]
        else:  # scipy returned a point other than the last one evaluated: evaluate it once more
            prediction = predict(params)
            calls += 1
    if params is None or not np.isfinite(mse(prediction, target)):
        raise CandidateInvalid(
            "rule 'finite': the train MSE at the fitted parameters is NaN or infinite (the published "
            "protocol counts this as a failed fit)"
        )
    return FitResult(
        params=params,
        train_nmse=nmse(prediction, target),
        prediction=prediction,
        calls=calls,
        iterations=iterations,
        stopped=stopped,
    )
