"""The trusted BFGS fit on its own: convergence, caps, non-finite trial points, settings."""

from __future__ import annotations

import numpy as np
import pytest

from environments.llm_sr.fit import FitSettings, fit_parameters, nmse
from harness.evaluation.errors import CandidateInvalid

X = np.linspace(-1.0, 1.0, 300)


def test_recovers_a_nonlinear_law_to_high_precision() -> None:
    target = 0.7 * np.sin(2.0 * X) - 0.3 * X**3

    def predict(p: np.ndarray) -> np.ndarray:
        return p[0] * np.sin(p[1] * X) + p[2] * X**3

    fit = fit_parameters(predict, target, FitSettings())
    assert fit.train_nmse < 1e-16
    assert fit.stopped in ("converged", "no-progress")
    assert np.allclose(fit.params[:3], [0.7, 2.0, -0.3], atol=1e-6) or np.allclose(
        fit.params[:3], [-0.7, -2.0, -0.3], atol=1e-6
    )
    assert (fit.params[3:] == 1.0).all()  # unused parameters are never moved
    assert np.array_equal(fit.prediction, predict(fit.params))


def test_call_cap_keeps_the_best_point_seen() -> None:
    target = 3.0 * X + 2.0
    seen: list[float] = []

    def predict(p: np.ndarray) -> np.ndarray:
        out = p[0] * X + p[1]
        seen.append(nmse(out, target))
        return out

    fit = fit_parameters(predict, target, FitSettings(max_calls=25))
    assert fit.calls == len(seen) == 25 and fit.stopped == "max-calls"
    assert fit.train_nmse == min(seen)


def test_iteration_cap() -> None:
    target = np.exp(1.5 * X)
    fit = fit_parameters(lambda p: p[0] * np.exp(p[1] * X), target, FitSettings(max_iter=2))
    assert fit.iterations <= 2 and fit.stopped == "max-iter"


def test_non_finite_trial_points_count_as_infinitely_bad() -> None:
    # The optimum (slope 3) lies beyond a region where the model returns NaN: the fit must back off
    # and return a finite point, never a NaN one.
    target = 3.0 * X

    def predict(p: np.ndarray) -> np.ndarray:
        out = p[0] * X
        return np.full_like(X, np.nan) if p[0] > 2.0 else out

    fit = fit_parameters(predict, target, FitSettings())
    assert np.isfinite(fit.train_nmse) and np.isfinite(fit.prediction).all()
    assert 1.0 <= fit.params[0] <= 2.0


def test_overflowing_trial_points_are_tolerated() -> None:
    target = np.exp(2.0 * X)
    with np.errstate(all="ignore"):
        fit = fit_parameters(lambda p: np.exp(p[0] * X * 100.0) ** p[1], target, FitSettings())
    assert np.isfinite(fit.train_nmse)


def test_non_finite_start_is_invalid() -> None:
    with pytest.raises(CandidateInvalid, match="rule 'finite'"):
        fit_parameters(lambda p: np.full_like(X, np.inf), X, FitSettings())
    with pytest.raises(CandidateInvalid, match="overflows"):
        fit_parameters(lambda p: np.full_like(X, 1e200), X, FitSettings())


def test_settings_from_params() -> None:
    s = FitSettings.from_params({"max_params": 10, "gtol": 1e-8, "max_calls": 50, "param_init": 0.5})
    assert (s.max_params, s.gtol, s.max_calls, s.init, s.fd_scheme) == (10, 1e-8, 50, 0.5, "3-point")
    with pytest.raises(ValueError, match="fd_scheme"):
        FitSettings.from_params({"fd_scheme": "5-point"})
    with pytest.raises(ValueError, match="invalid fit settings"):
        FitSettings.from_params({"max_calls": 0})


def test_nmse() -> None:
    y = np.array([0.0, 1.0, 2.0, 3.0])
    assert nmse(y, y) == 0.0
    assert nmse(np.full(4, y.mean()), y) == pytest.approx(1.0)
    assert nmse(np.full(4, 1e300), y) == float("inf")
