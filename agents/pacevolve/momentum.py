"""Momentum-Based Backtracking (MBB): relative progress, its EWMA, the trigger and the power-law sampler.

Scores are mapped to an island's progress u = clamp((s - s_0) / (r - s_0), 0, 1), where s_0 is
the island's measured initial score (the score of its first scored program, normally the initial
program; PACEvolve §3.3 and Table 3) and r is the target bound (the manifest's ``y_target``).
The sign of ``r - s_0`` carries the direction, so maximised and minimised metrics are alike. In u
the paper's gap G_t = s_t - r is proportional to 1 - u_t, so its relative progress

    R_t = (G_{t-1} - G_t) / G_{t-1} = (u_t - u_{t-1}) / (1 - u_{t-1})     (0 without improvement)

is the same number whatever the direction or scale of the metric, and u itself is CE's absolute
progress A_t = (s_0 - s_t) / (s_0 - r). A best worse than s_0 counts as no progress (Alg. 2
starts s_prev at s_0), and no relative progress is computed once the target is reached (the
reference's ``s_prev - r > 1e-9``).
"""

from __future__ import annotations

import math
import random

from pydantic import BaseModel, ConfigDict

from harness.runner.context import TaskSpec

GAP_EPSILON = 1e-9
"""Below this remaining gap (in u, or in score units for s_0 - r) relative progress is not computed."""


def progress_of(score: float | None, s0: float | None, task: TaskSpec) -> float:
    """Absolute progress A in [0, 1] of a score, measured from an island's initial score s_0.

    Args:
        score: A combined score, or None.
        s0: The island's initial score (None: not measured yet, so no progress).
        task: The task: its direction and target r = ``task.progress.y_target``.

    Returns:
        clamp((score - s0) / (r - s0), 0, 1), direction-aware; 0 for a missing or non-finite score.
        When s0 already meets the target (no gap to close) it is 1 for a score meeting the
        target and 0 otherwise (the reference's rule).
    """
    if score is None or s0 is None or not math.isfinite(score) or not math.isfinite(s0):
        return 0.0
    r = task.progress.y_target
    gap = (r - s0) if task.maximize else (s0 - r)
    if gap <= GAP_EPSILON:
        return 1.0 if (score >= r if task.maximize else score <= r) else 0.0
    return min(1.0, max(0.0, (score - s0) / (r - s0)))


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
    """Progress of the best score so far (0 = the island's initial score s_0)."""
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
