"""AHC 039 and 058 validation subsets on their tiny variants through the local backend (real g++):
a subset runs and scores some of the test cases, reports the usual metrics over them, and a full
evaluation is unchanged."""

from __future__ import annotations

import shutil

import pytest

from environments.ahc_common.batch import METRIC_NAMES
from harness.envs.registry import default_registry
from harness.evaluation.result import EvalResult

from ..subset_support import evaluate_ok, seed_drawing, seeds_with_distinct_draws, subset_id

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")

N_CASES = 4
FULL_TOTALS = {"ahc039-tiny": 1709, "ahc058-tiny": 10884174}
"""The initial program's total on the 4 cases (manifest comments), measured before subsets."""


def _cases(r: EvalResult) -> float:
    m = r.metrics
    return m["cases_ok"] + m["cases_tle"] + m["cases_runtime_error"] + m["cases_invalid_output"]


@pytest.fixture(scope="module")
def backend(local_backend: object) -> object:
    return local_backend


@pytest.fixture(scope="module", params=sorted(FULL_TOTALS))
def base(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def full(backend: object, base: str) -> EvalResult:
    return evaluate_ok(backend, base)


def test_tiny_variant_has_four_cases(base: str) -> None:
    v = default_registry().get(base)
    assert v.scorer_params["generated_cases"] == N_CASES and v.subset_unit == "test cases"


def test_full_evaluation_is_unchanged(full: EvalResult, base: str) -> None:
    assert tuple(full.metrics) == METRIC_NAMES
    assert full.metrics["total_score"] == FULL_TOTALS[base] and _cases(full) == N_CASES


def test_single_case_subsets_sum_to_the_full_total(backend: object, full: EvalResult, base: str) -> None:
    singles = [
        evaluate_ok(backend, subset_id(base, seed_drawing(N_CASES, 1, [i]), 1)) for i in range(N_CASES)
    ]
    for r in singles:
        assert tuple(r.metrics) == METRIC_NAMES  # the manifest fixes the metrics: no subset_size
        assert _cases(r) == 1 and r.score == r.metrics["total_score"]
    assert sum(r.metrics["total_score"] for r in singles) == full.metrics["total_score"]
    assert any(r.score != full.score for r in singles)


def test_subset_is_deterministic_and_sized(backend: object, full: EvalResult, base: str) -> None:
    seed = seeds_with_distinct_draws(N_CASES, 2, 1)[0]
    first = evaluate_ok(backend, subset_id(base, seed, 2))
    again = evaluate_ok(backend, subset_id(base, seed, 2))
    assert _cases(first) == 2
    assert again.metrics["total_score"] == first.metrics["total_score"] and again.score == first.score
    assert first.env_hash != full.env_hash
