"""The saturation trigger, the validation gate and the rollback check (pure functions)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agents.pace.credit import gate, saturation, should_roll_back

unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@given(u0=unit, u1=unit, eps=unit)
def test_saturation_follows_the_chosen_rule(u0: float, u1: float, eps: float) -> None:
    le, lt = saturation(u0, u1, eps, "le"), saturation(u0, u1, eps, "lt")
    assert le.delta_u == pytest.approx(u1 - u0)
    assert le.saturated == (u1 - u0 <= eps)
    assert lt.saturated == (u1 - u0 < eps)
    assert lt.saturated <= le.saturated  # "<" never saturates where "<=" does not


def test_boundary_and_epsilon_zero() -> None:
    assert saturation(0.5, 0.51, 0.01, "le").saturated is (0.51 - 0.5 <= 0.01)
    assert saturation(0.25, 0.25, 0.0, "le").saturated  # no gain saturates under <=
    assert not saturation(0.25, 0.25, 0.0, "lt").saturated  # ε = 0 with "<" disables the slow timescale
    assert saturation(0.2, 0.3, 1.0, "le").saturated  # ε = 1 unlocks it after the first round
    with pytest.raises(ValueError):
        saturation(math.nan, 0.2, 0.01)
    with pytest.raises(ValueError):
        saturation(0.1, 0.2, 0.01, "ge")  # type: ignore[arg-type]


@given(u_old=st.none() | unit, u_new=st.none() | unit, delta=st.floats(min_value=-1.0, max_value=1.0))
def test_gate_accepts_only_a_margin_above_delta(
    u_old: float | None, u_new: float | None, delta: float
) -> None:
    d = gate(u_old, u_new, delta)
    expected = u_new is not None and u_new - (u_old or 0.0) > delta
    assert d.accepted is expected
    assert d.reason


def test_gate_examples_and_budget() -> None:
    assert gate(0.50, 0.53, 0.02).accepted
    assert not gate(0.25, 0.5, 0.25).accepted  # a margin equal to δ is not enough (exact binary values)
    assert not gate(0.50, 0.55, 0.02, tokens=101, budget=100).accepted
    assert gate(0.50, 0.55, 0.02, tokens=100, budget=100).accepted
    assert gate(None, 0.1, 0.02).accepted  # a failed incumbent counts as u = 0
    assert not gate(0.3, None, -1.0).accepted  # even with the gate off, no candidate is no accept
    assert gate(0.5, 0.0, -1.0).accepted  # δ = -1 accepts any scored candidate


@given(baseline=unit, full=st.none() | unit)
def test_rollback_iff_full_evaluation_drops(baseline: float, full: float | None) -> None:
    assert should_roll_back(baseline, full) is (full is None or full < baseline)
