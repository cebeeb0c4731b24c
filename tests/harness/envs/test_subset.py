"""Subset requests: id suffix round trip, parameter parsing, and the seeded draw of unit indices."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.envs.subset import SubsetRequest, draw_indices, subset_of, unit_indices

seeds = st.integers(min_value=0, max_value=2**63)
sizes = st.integers(min_value=1, max_value=300)
unit_counts = st.integers(min_value=0, max_value=300)


def test_suffix_and_parse_round_trip() -> None:
    req = SubsetRequest(123, 4)
    assert req.to_id_suffix() == "~subset-123-4"
    assert SubsetRequest.parse_env_id("eplb-tiny~subset-123-4") == ("eplb-tiny", req)
    assert SubsetRequest.parse_env_id("eplb-tiny") == ("eplb-tiny", None)
    assert SubsetRequest.parse_env_id("multi-evolve-tiny~subset-0-1") == (
        "multi-evolve-tiny",
        SubsetRequest(0, 1),
    )


@given(base=st.from_regex(r"[a-z][a-z0-9-]{0,20}", fullmatch=True), seed=seeds, size=sizes)
def test_parse_inverts_the_suffix(base: str, seed: int, size: int) -> None:
    req = SubsetRequest(seed, size)
    assert SubsetRequest.parse_env_id(base + req.to_id_suffix()) == (base, req)


@pytest.mark.parametrize(
    "env_id",
    [
        "eplb-tiny~subset-1",
        "eplb-tiny~subset-1-0",
        "eplb-tiny~subset--1-3",
        "eplb-tiny~subset-01-3",
        "eplb-tiny~subset-1-03",
        "eplb-tiny~subset-a-3",
        "eplb-tiny~subset-1-3-",
        "eplb-tiny~subset-1-3~subset-1-3",
        "~subset-1-3",
        "eplb-tiny~other-1-3",
        "eplb-tiny~subset-1 -3",
    ],
)
def test_malformed_suffix_is_a_clear_value_error(env_id: str) -> None:
    with pytest.raises(ValueError, match="subset suffix"):
        SubsetRequest.parse_env_id(env_id)


@pytest.mark.parametrize(
    ("seed", "size", "message"),
    [(-1, 3, "seed must be >= 0"), (1, 0, "size must be >= 1"), (1.5, 3, "integer"), (1, True, "integer")],
)
def test_request_fields_are_checked(seed: object, size: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SubsetRequest(seed, size)  # type: ignore[arg-type]


def test_subset_of_reads_the_scorer_parameter() -> None:
    assert subset_of({"window": 100}) is None
    assert subset_of({"subset": {"seed": 5, "size": 2}, "window": 100}) == SubsetRequest(5, 2)
    assert SubsetRequest(5, 2).to_params() == {"seed": 5, "size": 2}


@pytest.mark.parametrize(
    "raw", [[5, 2], {"seed": 5}, {"seed": 5, "size": 2, "extra": 1}, {"seed": "5", "size": 2}, "5-2"]
)
def test_subset_of_rejects_malformed_parameters(raw: object) -> None:
    with pytest.raises(ValueError):
        subset_of({"subset": raw})


@given(n=unit_counts, seed=seeds, size=sizes)
def test_draw_is_sorted_distinct_in_range_and_sized(n: int, seed: int, size: int) -> None:
    got = draw_indices(n, SubsetRequest(seed, size))
    assert len(got) == min(size, n)
    assert got == sorted(set(got))
    assert all(0 <= i < n for i in got)


@given(n=unit_counts, seed=seeds, size=sizes)
def test_draw_is_deterministic(n: int, seed: int, size: int) -> None:
    req = SubsetRequest(seed, size)
    assert draw_indices(n, req) == draw_indices(n, SubsetRequest(seed, size))


@settings(max_examples=50)
@given(n=st.integers(min_value=6, max_value=200), size=st.integers(min_value=1, max_value=3), base=seeds)
def test_different_seeds_usually_draw_different_subsets(n: int, size: int, base: int) -> None:
    # With n >= 6 and size <= 3 there are >= 6 possible subsets; 20 seeds drawing one subset
    # each all alike would be a broken draw (chance (1/6)^19 for a fair one).
    draws = {tuple(draw_indices(n, SubsetRequest(base + k, size))) for k in range(20)}
    assert len(draws) >= 3


def test_draw_covers_every_unit_over_seeds() -> None:
    seen: set[int] = set()
    for seed in range(200):
        seen.update(draw_indices(10, SubsetRequest(seed, 2)))
    assert seen == set(range(10))


def test_unit_indices_is_everything_without_a_request() -> None:
    assert unit_indices(5, {}) == [0, 1, 2, 3, 4]
    assert unit_indices(5, {"subset": {"seed": 9, "size": 2}}) == draw_indices(5, SubsetRequest(9, 2))
    assert unit_indices(3, {"subset": {"seed": 9, "size": 10}}) == [0, 1, 2]
    with pytest.raises(ValueError, match="n_units"):
        draw_indices(-1, SubsetRequest(0, 1))
