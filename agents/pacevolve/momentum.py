"""Momentum-Based Backtracking (MBB): relative progress, its EWMA, the trigger and the power-law sampler.

Scores are mapped to normalised progress u = clamp((y - y_init) / (y_target - y_init), 0, 1) with
:func:`harness.scoring.progress.normalized_progress`, which handles maximised and minimised
metrics alike. In u the paper's gap G_t = s_t - r is proportional to 1 - u_t, so its relative
progress

    R_t = (G_{t-1} - G_t) / G_{t-1} = (u_t - u_{t-1}) / (1 - u_{t-1})     (0 without improvement)

is the same number whatever the direction or scale of the metric. The clamp means a best score
worse than y_init counts as no progress (the paper starts s_prev at s_0 = y_init), and no
relative progress is computed once the target is reached (the reference's ``s_prev - r > 1e-9``).
"""

from __future__ import annotations

import random

from pydantic import BaseModel, ConfigDict

from harness.runner.context import TaskSpec
from harness.scoring.progress import normalized_progress

GAP_EPSILON = 1e-9
"""Below this remaining gap (in u) relative progress is not computed."""


def progress_of(score: float | None, task: TaskSpec) -> float:
    """Absolute progress u in [0, 1] of a score on a task (0 for a missing score).

    Args:
        score: A combined score, or None.
        task: The task (its direction is implied by ``progress.y_init`` and ``progress.y_target``).

    Returns:
        The clamped normalised progress; this is also CE's absolute progress A = (s_0 - s)/(s_0 - r).
    """
    return normalized_progress(score, task.progress.y_init, task.progress.y_target)


def relative_progress(u_prev: float, u_now: float) -> float:
    """R_t: the fraction of the remaining gap closed by a new best.

    Args:
        u_prev: Progress of the previous best (s_{t-1}).
        u_now: Progress of the current best (s_t).

    Returns:
        (u_now - u_prev) / (1 - u_prev) when it improved and a gap remained, else 0.
    """
    gap = 1.0 - u_prev
    if u_now <= u_prev or gap <= GAP_EPSILON:
        return 0.0
    return (u_now - u_prev) / gap


class Momentum(BaseModel):
    """Relative improvement momentum of one island: m_t = beta * m_{t-1} + (1 - beta) * R_t."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    value: float = 1.0
    """Current momentum m (the paper starts at 1.0)."""
    u_prev: float = 0.0
    """Progress of the best score so far (0 = the initial score s_0)."""
    updates: int = 0
    """Updates applied."""

    def update(self, u_best: float, beta: float) -> float:
        """Fold the island's current best into the momentum.

        Args:
            u_best: Progress of the island's best score after this iteration.
            beta: Decay factor in [0, 1).

        Returns:
            The relative progress R_t of this update.
        """
        r = relative_progress(self.u_prev, u_best)
        self.value = beta * self.value + (1.0 - beta) * r
        self.u_prev = max(self.u_prev, u_best)
        self.updates += 1
        return r


def should_intervene(momentum: float, threshold: float, completed: int, last: int, freeze: int) -> bool:
    """The MBB trigger: momentum below the threshold, outside the freeze period.

    Args:
        momentum: Current m.
        threshold: epsilon_rel.
        completed: Iterations the island has completed (momentum updates).
        last: ``completed`` at the island's last intervention (0 at the start).
        freeze: Iterations after the start and after each intervention in which nothing triggers.

    Returns:
        True when ``momentum < threshold`` and ``completed - last > freeze``.
    """
    return momentum < threshold and completed - last > freeze


def power_law_weights(n: int, alpha: float) -> list[float]:
    """P(k) proportional to (k + 1) ** -alpha over k = 0..n-1 (k = 0 is the oldest saved state).

    Args:
        n: Number of saved states (at least 1).
        alpha: Exponent (> 0); larger favours early states more.

    Returns:
        The normalised probabilities.

    Raises:
        ValueError: If ``n < 1`` or ``alpha <= 0``.
    """
    if n < 1 or alpha <= 0:
        raise ValueError("need n >= 1 and alpha > 0")
    raw = [(k + 1) ** -alpha for k in range(n)]
    total = sum(raw)
    return [w / total for w in raw]


def sample_power_law(n: int, alpha: float, rng: random.Random) -> int:
    """Draw a backtrack target k in [0, n) with :func:`power_law_weights`.

    Raises:
        ValueError: If ``n < 1`` or ``alpha <= 0``.
    """
    return rng.choices(range(n), weights=power_law_weights(n, alpha))[0]
