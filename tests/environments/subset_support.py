"""Shared checks of the family subset tests: evaluate real tiny variants on derived subset ids."""

from __future__ import annotations

import math

from harness.envs.registry import Variant, default_registry
from harness.envs.subset import SubsetRequest, draw_indices
from harness.evaluation.result import EvalResult, Status


def subset_id(base_id: str, seed: int, size: int) -> str:
    """The derived env id of a subset request."""
    return base_id + SubsetRequest(seed, size).to_id_suffix()


def evaluate_ok(backend: object, env_id: str, source: str | None = None) -> EvalResult:
    """Evaluate ``source`` (default: the initial program) on ``env_id``; it must score OK."""
    variant: Variant = default_registry().get(env_id)
    result = backend.evaluate(variant, source or variant.initial_program)  # type: ignore[attr-defined]
    assert isinstance(result, EvalResult)
    assert result.status is Status.OK, result.reason
    assert result.env_id == variant.id and result.env_hash == variant.hash
    assert result.score is not None and math.isfinite(result.score)
    return result


def seed_drawing(n_units: int, size: int, wanted: list[int]) -> int:
    """The smallest seed whose draw of ``size`` of ``n_units`` units is exactly ``wanted``."""
    for seed in range(100_000):
        if draw_indices(n_units, SubsetRequest(seed, size)) == wanted:
            return seed
    raise AssertionError(f"no seed below 100000 draws {wanted} of {n_units}")


def seeds_with_distinct_draws(n_units: int, size: int, count: int) -> list[int]:
    """``count`` seeds whose draws are pairwise different (so their scores may differ)."""
    seeds: list[int] = []
    seen: set[tuple[int, ...]] = set()
    seed = 0
    while len(seeds) < count:
        draw = tuple(draw_indices(n_units, SubsetRequest(seed, size)))
        if draw not in seen:
            seen.add(draw)
            seeds.append(seed)
        seed += 1
    return seeds
