"""EPLB validation subsets on eplb-tiny through the local backend: a subset scores some of the
predict-next-window steps i -> i+1, each with its own pair, and a full evaluation is unchanged."""

from __future__ import annotations

import pytest

from harness.envs.registry import default_registry
from harness.evaluation.result import EvalResult

from ..subset_support import evaluate_ok, seed_drawing, seeds_with_distinct_draws, subset_id

BASE = "eplb-tiny"
N_STEPS = 5  # 6 windows: steps 0 -> 1 .. 4 -> 5
FULL_METRICS = {
    "combined",
    "balancedness_expert",
    "balancedness_gpu",
    "rebalance_seconds",
    "transport_seconds",
    "heldout_key",
}


@pytest.fixture(scope="module")
def backend(local_backend: object) -> object:
    return local_backend


@pytest.fixture(scope="module")
def full(backend: object) -> EvalResult:
    return evaluate_ok(backend, BASE)


def test_tiny_variant_has_five_window_steps() -> None:
    v = default_registry().get(BASE)
    assert v.scorer_params["windows"] - 1 == N_STEPS
    assert "window" in v.subset_unit


def test_full_evaluation_is_unchanged(full: EvalResult) -> None:
    assert set(full.metrics) == FULL_METRICS  # no subset_size on a full evaluation
    # The windows come from the installation's held-out key (issue 20), so B_exp is that draw's;
    # the public draw's y_init (B_exp 0.4274) is checked in test_eplb_scorer.
    assert 0.0 < full.metrics["balancedness_expert"] < 1.0
    assert full.score == pytest.approx((full.metrics["balancedness_expert"] + 1.0) / 2.0)


def test_single_step_subsets_average_to_the_full_balance(backend: object, full: EvalResult) -> None:
    per_step = []
    for i in range(N_STEPS):
        r = evaluate_ok(backend, subset_id(BASE, seed_drawing(N_STEPS, 1, [i]), 1))
        assert r.metrics["subset_size"] == 1.0
        per_step.append(r.metrics["balancedness_expert"])
    # Same per-step floats summed in the same order: bit-identical to the full mean.
    assert sum(per_step) / N_STEPS == full.metrics["balancedness_expert"]
    assert len(set(per_step)) > 1


def test_subset_is_deterministic_and_differs_from_the_full_score(backend: object, full: EvalResult) -> None:
    seeds = seeds_with_distinct_draws(N_STEPS, 2, 4)
    balance = {}
    for seed in seeds:
        r = evaluate_ok(backend, subset_id(BASE, seed, 2))
        assert r.metrics["subset_size"] == 2.0 and set(r.metrics) == FULL_METRICS | {"subset_size"}
        balance[seed] = r.metrics["balancedness_expert"]
    again = evaluate_ok(backend, subset_id(BASE, seeds[0], 2))
    assert again.metrics["balancedness_expert"] == balance[seeds[0]]
    assert any(b != full.metrics["balancedness_expert"] for b in balance.values())


def test_oversized_subset_scores_every_step(backend: object, full: EvalResult) -> None:
    r = evaluate_ok(backend, subset_id(BASE, 3, 50))
    assert r.metrics["subset_size"] == N_STEPS
    assert r.metrics["balancedness_expert"] == full.metrics["balancedness_expert"]
    assert r.env_hash != full.env_hash
