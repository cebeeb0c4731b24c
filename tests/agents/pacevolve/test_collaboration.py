"""CE: the action weights of PACEvolve App. B.3 on the nine worked examples, and action sampling."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from agents.pacevolve.collaboration import BACKTRACK, CROSSOVER, action_weights, choose_action

# (A_i, partners' A_j, w_BT, w_C per partner, P(backtrack)) from the notes' table
WORKED = [
    (0.1, [0.1], 0.81, [0.01], 0.9878),
    (0.9, [0.9], 0.01, [0.81], 0.0122),
    (0.5, [0.5], 0.25, [0.25], 0.5),
    (0.2, [0.6], 0.192, [0.472], 0.2892),
    (0.7, [0.3], 0.526, [0.126], 0.8067),
    (0.0, [0.5], 0.25, [0.5], 0.3333),
    (0.3, [0.8, 0.5], 0.07, [0.62, 0.2], 0.0787),
    (1.0, [1.0], 0.0, [1.0], 0.0),
    (0.0, [0.0], 1.0, [0.0], 1.0),
]


@pytest.mark.parametrize(("a_i", "a_js", "w_bt", "w_c", "p_bt"), WORKED)
def test_worked_examples(a_i: float, a_js: list[float], w_bt: float, w_c: list[float], p_bt: float) -> None:
    partners = {j + 1: a for j, a in enumerate(a_js)}
    w = action_weights(a_i, partners)
    assert w.backtrack == pytest.approx(w_bt, abs=1e-9)
    assert [w.crossover[j] for j in partners] == pytest.approx(w_c, abs=1e-9)
    assert w.probabilities()[BACKTRACK] == pytest.approx(p_bt, abs=5e-5)
    assert sum(w.probabilities().values()) == pytest.approx(1.0)


def test_single_island_and_zero_weights_always_backtrack() -> None:
    w = action_weights(0.4, {})
    assert w.backtrack == 1.0 and w.crossover == {}
    assert choose_action(w, random.Random(0)) == (BACKTRACK, None)
    zero = action_weights(0.0, {1: 0.0})  # both A = 0: w_BT = 1 (stagnation), certain backtrack
    assert all(choose_action(zero, random.Random(s)) == (BACKTRACK, None) for s in range(20))


def test_synergy_goes_to_the_best_partner_only_and_ties_pick_the_first() -> None:
    w = action_weights(0.5, {2: 0.9, 3: 0.9, 4: 0.1})
    s = 1 - 0.4
    assert w.crossover[2] == pytest.approx(0.4 + s * 0.5 * 0.9)
    assert w.crossover[3] == pytest.approx(0.4)
    assert w.crossover[4] == 0.0


def test_progress_is_clamped() -> None:
    assert action_weights(1.7, {1: -0.3}).probabilities() == action_weights(1.0, {1: 0.0}).probabilities()


def test_choose_action_samples_with_the_weights() -> None:
    w = action_weights(0.2, {1: 0.6})  # P(BT) = 0.2892
    rng = random.Random(3)
    draws = Counter(choose_action(w, rng) for _ in range(20_000))
    assert draws[(BACKTRACK, None)] / 20_000 == pytest.approx(0.2892, abs=0.015)
    assert draws[(CROSSOVER, 1)] / 20_000 == pytest.approx(0.7108, abs=0.015)
