"""Self-adaptive Collaborative Evolution (CE): choose backtrack or crossover_j for a stagnating island.

With A_i the triggered island's absolute progress and A_best = max over partners j != i of A_j,
reached first by partner j_best (PACEvolve App. B.3):

    w_C_j     = max(0, A_j - A_i)                     for every partner j
    S         = max(0, 1 - |A_i - A_best|)
    w_BT      = max(0, A_i - A_best) + S (1 - A_i)(1 - A_best)
    w_C_jbest += S * A_i * A_best
    P(a)      = w_a / (w_BT + sum_j w_C_j)

A single island, or weights summing to (almost) zero, always backtracks.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

ZERO_TOTAL = 1e-9
"""Total weight below which the island backtracks."""
BACKTRACK = "backtrack"
"""Name of the backtrack action."""
CROSSOVER = "crossover"
"""Name of the crossover action."""


@dataclass(frozen=True)
class ActionWeights:
    """Sampling weights of the intervention actions of one island."""

    backtrack: float
    """w_BT."""
    crossover: dict[int, float]
    """Partner island -> w_C_j."""

    @property
    def total(self) -> float:
        """Sum of all weights."""
        return self.backtrack + sum(self.crossover.values())

    def probabilities(self) -> dict[str, float]:
        """P(a) for ``backtrack`` and ``crossover:<j>`` (backtrack certain when the total is ~0)."""
        total = self.total
        if total < ZERO_TOTAL:
            return {BACKTRACK: 1.0, **{f"{CROSSOVER}:{j}": 0.0 for j in self.crossover}}
        return {BACKTRACK: self.backtrack / total} | {
            f"{CROSSOVER}:{j}": w / total for j, w in self.crossover.items()
        }


def _clamp(a: float) -> float:
    return min(1.0, max(0.0, a))


def action_weights(a_i: float, partners: Mapping[int, float]) -> ActionWeights:
    """The CE weights for island i given its partners' absolute progress.

    Args:
        a_i: Absolute progress of the triggered island (clamped to [0, 1]).
        partners: Partner island index -> its absolute progress (clamped to [0, 1]).

    Returns:
        The weights; with no partner only backtracking has weight (1).
    """
    a_i = _clamp(a_i)
    if not partners:
        return ActionWeights(1.0, {})
    progress = {j: _clamp(a) for j, a in partners.items()}
    j_best = max(progress, key=lambda j: (progress[j], -j))  # first index among ties
    a_best = progress[j_best]
    similarity = max(0.0, 1.0 - abs(a_i - a_best))
    w_bt = max(0.0, a_i - a_best) + similarity * (1.0 - a_i) * (1.0 - a_best)
    w_c = {j: max(0.0, a - a_i) for j, a in progress.items()}
    w_c[j_best] += similarity * a_i * a_best
    return ActionWeights(w_bt, w_c)


def choose_action(weights: ActionWeights, rng: random.Random) -> tuple[str, int | None]:
    """Sample an action: ``("backtrack", None)`` or ``("crossover", j)``.

    Args:
        weights: The action weights.
        rng: Source of randomness.

    Returns:
        The action and, for crossover, the partner island.
    """
    if weights.total < ZERO_TOTAL or not weights.crossover:
        return BACKTRACK, None
    actions: list[tuple[str, int | None]] = [(BACKTRACK, None)]
    actions += [(CROSSOVER, j) for j in weights.crossover]
    w = [weights.backtrack, *weights.crossover.values()]
    return rng.choices(actions, weights=w)[0]
