"""MBB: relative progress, the momentum EWMA and its trigger, and the power-law backtrack sampler."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from agents.pacevolve.momentum import (
    Momentum,
    power_law_weights,
    progress_of,
    relative_progress,
    sample_power_law,
    should_intervene,
)
from harness.envs.manifest import Direction, Language, Progress
from harness.runner.context import TaskSpec


def make_task(maximize: bool, y_init: float, y_target: float) -> TaskSpec:
    return TaskSpec(
        env_id="unit-tiny",
        prompt="",
        initial_program="",
        language=Language.PYTHON,
        entry_point="f",
        signature="f()",
        direction=Direction.MAXIMIZE if maximize else Direction.MINIMIZE,
        combined="score",
        metrics=(),
        progress=Progress(y_init=y_init, y_target=y_target),
    )


def test_relative_progress_matches_the_paper_formula_for_minimised_llm_sr(task_factory: Callable) -> None:
    task = task_factory(maximize=False, y_init=-2.0, y_target=-10.0)  # log10 NMSE, r = -10, s0 = -2
    u_prev, u_now = progress_of(-4.0, -2.0, task), progress_of(-5.0, -2.0, task)
    r = relative_progress(u_prev, u_now)
    assert r == pytest.approx(1 / 6)  # (s_prev - s)/(s_prev - r) = 1 / 6
    assert r == pytest.approx((-4.0 - -5.0) / (-4.0 - -10.0))


def test_relative_progress_is_direction_and_scale_free(task_factory: Callable) -> None:
    up = task_factory(maximize=True, y_init=0.2, y_target=0.9)
    down = task_factory(maximize=False, y_init=10.0, y_target=3.0)
    r_up = relative_progress(progress_of(0.3, 0.2, up), progress_of(0.5, 0.2, up))
    # the same fractions of the gap on the minimised task
    r_down = relative_progress(progress_of(10 - 1.0, 10.0, down), progress_of(10 - 3.0, 10.0, down))
    assert r_up == pytest.approx((0.5 - 0.3) / (0.9 - 0.3))
    assert r_up == pytest.approx(r_down)


def test_no_progress_cases(task_factory: Callable) -> None:
    assert relative_progress(0.4, 0.4) == 0.0
    assert relative_progress(0.4, 0.3) == 0.0  # a worse best never happens, but is 0 anyway
    assert relative_progress(1.0, 1.0) == 0.0  # target reached: no gap left
    task = task_factory(maximize=True, y_init=0.5, y_target=1.0)
    assert progress_of(0.1, 0.5, task) == 0.0  # worse than s0 counts as s0
    assert progress_of(None, 0.5, task) == 0.0
    assert progress_of(0.7, None, task) == 0.0  # s0 not measured yet
    assert progress_of(float("nan"), 0.5, task) == 0.0


def test_progress_is_measured_from_the_islands_own_s0_not_the_manifest(task_factory: Callable) -> None:
    task = task_factory(maximize=True, y_init=0.2, y_target=1.0)
    # Table 3: A = (s0 - s)/(s0 - r) with s0 the island's initial score; the manifest's y_init is not used
    assert progress_of(0.8, 0.6, task) == pytest.approx((0.6 - 0.8) / (0.6 - 1.0))
    assert progress_of(0.6, 0.6, task) == 0.0
    assert progress_of(0.8, 0.2, task) == pytest.approx(0.75)
    low = task_factory(maximize=False, y_init=-2.0, y_target=-10.0)
    assert progress_of(-6.0, -4.0, low) == pytest.approx(1 / 3)


def test_progress_when_s0_already_meets_the_target(task_factory: Callable) -> None:
    task = task_factory(maximize=True, y_init=0.2, y_target=0.5)
    assert progress_of(0.6, 0.6, task) == 1.0  # no gap left: the reference's rule
    low = task_factory(maximize=False, y_init=1.0, y_target=0.0)
    assert progress_of(0.0, 0.0, low) == 1.0
    assert progress_of(1.0, -0.5, low) == 0.0  # cannot happen for a best, but defined


def test_momentum_from_one_falls_below_threshold_after_43_stagnant_steps() -> None:
    m = Momentum(value=1.0)
    steps = 0
    while m.value >= 0.001:
        m.update(0.0, beta=0.85)
        steps += 1
    assert steps == 43
    assert m.value == pytest.approx(0.85**43)


def test_one_improvement_then_27_stagnant_steps() -> None:
    m = Momentum(value=0.0)
    r = m.update(0.5, beta=0.85)  # from u=0 to u=0.5: R = 0.5
    assert r == pytest.approx(0.5) and m.value == pytest.approx(0.075)
    steps = 0
    while m.value >= 0.001:
        assert m.update(0.5, beta=0.85) == 0.0
        steps += 1
    assert steps == 27


def test_momentum_tracks_the_best_only() -> None:
    m = Momentum(value=1.0)
    m.update(0.5, beta=0.85)
    m.update(0.2, beta=0.85)  # a regression of the input does not lower u_prev
    assert m.u_prev == 0.5
    r = m.update(0.75, beta=0.85)
    assert r == pytest.approx(0.5)


def test_trigger_needs_low_momentum_and_the_end_of_the_freeze() -> None:
    assert not should_intervene(0.0005, 0.001, completed=15, last=0, freeze=15)
    assert should_intervene(0.0005, 0.001, completed=16, last=0, freeze=15)
    assert not should_intervene(0.002, 0.001, completed=100, last=0, freeze=15)
    # re-applied after an intervention at completed = 40
    assert not should_intervene(0.0005, 0.001, completed=55, last=40, freeze=15)
    assert should_intervene(0.0005, 0.001, completed=56, last=40, freeze=15)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (5, [0.568, 0.201, 0.109, 0.071, 0.051]),
        (10, [0.501, 0.177, 0.096, 0.063, 0.045, 0.034, 0.027, 0.022, 0.019, 0.016]),
    ],
)
def test_power_law_weights_match_the_reference_values(n: int, expected: list[float]) -> None:
    w = power_law_weights(n, 1.5)
    assert math.fsum(w) == pytest.approx(1.0)
    assert w == pytest.approx(expected, abs=6e-4)
    assert all(a > b for a, b in zip(w, w[1:], strict=False))  # favours early (k = 0) states


def test_power_law_sampler_follows_its_distribution() -> None:
    rng = random.Random(0)
    n, draws = 6, 60_000
    counts = Counter(sample_power_law(n, 1.5, rng) for _ in range(draws))
    expected = power_law_weights(n, 1.5)
    chi2 = sum((counts[k] - draws * p) ** 2 / (draws * p) for k, p in enumerate(expected))
    assert set(counts) == set(range(n))
    assert chi2 < 20.5  # chi-square, 5 degrees of freedom, p = 0.001


def test_power_law_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        power_law_weights(0, 1.5)
    with pytest.raises(ValueError):
        power_law_weights(3, 0.0)
    assert sample_power_law(1, 1.5, random.Random(1)) == 0


scores = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)


@given(s0=scores, r=scores, a=scores, b=scores, maximize=st.booleans())
def test_progress_properties(s0: float, r: float, a: float, b: float, maximize: bool) -> None:
    """A is in [0, 1], 0 at s0, 1 at r, monotone in the score, and R matches the paper's raw formula."""
    assume(abs(r - s0) > 1e-3 and (r > s0) == maximize)  # r lies in the direction of improvement
    task = make_task(maximize, y_init=r + 1.0, y_target=r)  # y_init is not used by progress_of
    pa, pb = progress_of(a, s0, task), progress_of(b, s0, task)
    assert 0.0 <= pa <= 1.0
    assert progress_of(s0, s0, task) == 0.0 and progress_of(r, s0, task) == 1.0
    if task.better(a, b):
        assert pa >= pb
    # R_t = (G_prev - G_now) / G_prev with G = |s - r|, for bests between s0 and r
    lo, hi = sorted((s0, r))
    prev, now = min(max(a, lo), hi), min(max(b, lo), hi)
    if task.better(prev, now):
        prev, now = now, prev
    g_prev, g_now = abs(prev - r), abs(now - r)
    assume(g_prev > 1e-6 * abs(r - s0))
    expected = (g_prev - g_now) / g_prev
    got = relative_progress(progress_of(prev, s0, task), progress_of(now, s0, task))
    assert got == pytest.approx(expected, rel=1e-6, abs=1e-6)
