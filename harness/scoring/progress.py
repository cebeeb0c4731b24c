"""Direction-aware normalised progress, shared by leaderboards and RL reward shaping."""

from __future__ import annotations

import math


def normalized_progress(y: float | None, y_init: float, y_target: float) -> float:
    """Map a score to u in [0, 1]: 0 at ``y_init``, 1 at ``y_target``, clamped.

    The direction is implied by the bounds: when ``y_target < y_init`` smaller is better.
    A missing or non-finite score maps to 0 (a failure earns no progress).

    Args:
        y: The score, or None for a failed evaluation.
        y_init: Score of the initial program.
        y_target: Score regarded as solved.

    Returns:
        The clamped progress.

    Raises:
        ValueError: If ``y_init == y_target``.
    """
    if y_init == y_target:
        raise ValueError("y_init and y_target must differ")
    if y is None or not math.isfinite(y):
        return 0.0
    u = (y - y_init) / (y_target - y_init)
    return min(1.0, max(0.0, u))


def progress_reward(
    y: float | None, y_init: float, y_target: float, c: float = 5.0, alpha: float = 1.0, fail: float = -1.0
) -> float:
    """RL reward R = c * u(y)^alpha, and ``fail`` for a failed or non-finite score (PACEvolve++ Eq. 5).

    Raises:
        ValueError: If ``y_init == y_target`` or ``c``/``alpha`` are not positive.
    """
    if c <= 0 or alpha <= 0:
        raise ValueError("c and alpha must be positive")
    if y is None or not math.isfinite(y):
        return fail
    return c * normalized_progress(y, y_init, y_target) ** alpha
