"""LLM-SR validation subsets on llm-sr-tiny through the local backend: a subset scores the NMSE on
some test_id points; the fit, every prediction and the other splits' metrics are unchanged."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from harness.envs.registry import default_registry
from harness.evaluation.result import EvalResult, Status

from ..subset_support import evaluate_ok, seeds_with_distinct_draws, subset_id

BASE = "llm-sr-tiny"
N_POINTS = 200
UNCHANGED = ("train_mse", "train_nmse", "nmse_ood", "log10_nmse_ood", "fit_calls")


@pytest.fixture(scope="module")
def backend() -> Iterator[object]:
    from harness.sandbox.local import LocalBackend

    with LocalBackend(workers=1, infra_retries=0) as b:
        yield b


@pytest.fixture(scope="module")
def full(backend: object) -> EvalResult:
    return evaluate_ok(backend, BASE)


def test_tiny_variant_has_200_test_id_points() -> None:
    v = default_registry().get(BASE)
    assert v.scorer_params["n_test_id"] == N_POINTS and v.subset_unit == "test_id data points"


def test_full_evaluation_is_unchanged(full: EvalResult) -> None:
    assert "subset_size" not in full.metrics
    assert full.score == pytest.approx(-1.014, abs=5e-4)  # the manifest's y_init, measured before subsets


def test_subset_is_deterministic_differs_and_keeps_the_fit(backend: object, full: EvalResult) -> None:
    seeds = seeds_with_distinct_draws(N_POINTS, 20, 3)
    results = [evaluate_ok(backend, subset_id(BASE, s, 20)) for s in seeds]
    for r in results:
        assert r.metrics["subset_size"] == 20.0
        assert r.score == r.metrics["log10_nmse_id"] and math.isfinite(r.score)
        for key in UNCHANGED:
            assert r.metrics[key] == full.metrics[key], key
    assert any(r.score != full.score for r in results)
    assert len({r.score for r in results}) > 1
    again = evaluate_ok(backend, subset_id(BASE, seeds[0], 20))
    assert again.score == results[0].score


def test_subset_of_every_point_equals_the_full_score(backend: object, full: EvalResult) -> None:
    r = evaluate_ok(backend, subset_id(BASE, 4, N_POINTS))
    assert r.metrics["subset_size"] == N_POINTS
    assert r.metrics["nmse_id"] == full.metrics["nmse_id"] and r.score == full.score


def test_single_point_subset_is_an_infra_error_not_the_candidates(backend: object) -> None:
    variant = default_registry().get(subset_id(BASE, 1, 1))
    r = backend.evaluate(variant, variant.initial_program)  # type: ignore[attr-defined]
    assert r.status is Status.INFRA_ERROR
    assert "at least 2 points" in r.reason
