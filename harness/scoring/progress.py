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


def parse_score(y: object) -> float | None:
    """A finite float from a candidate's score, or None when it is missing, unparsable or non-finite.

    Booleans are rejected (``True`` is not a score); strings are parsed with ``float``.
    """
    if y is None or isinstance(y, bool):
        return None
    if not isinstance(y, int | float | str):
        try:
            y = float(y)  # type: ignore[arg-type]  # numpy scalars and other real numbers
        except (TypeError, ValueError):
            return None
    try:
        value = float(y)
    except (TypeError, ValueError, OverflowError):
        return None
    return value if math.isfinite(value) else None


def progress_reward(
    y: object,
    y_init: float,
    y_target: float,
    c: float = 5.0,
    alpha: float = 1.0,
    fail: float = -1.0,
    *,
    y_min: float | None = None,
    y_max: float | None = None,
) -> float:
    """RL reward R = c * u(y)^alpha; ``fail`` for a failed, unparsable or non-finite score (Eq. 5).

    The direction comes from ``y_init``/``y_target`` (smaller is better when the target is
    below the initial score). Optional explicit bounds ``y_min < y_max`` replace the default
    ``[min(y_init, y_target), max(y_init, y_target)]``; scores outside are clamped, so
    u = (y - y_min)/(y_max - y_min) when maximising and (y_max - y)/(y_max - y_min) when minimising.

    Raises:
        ValueError: If ``y_init == y_target``, ``c``/``alpha`` are not positive, only one explicit
            bound is given, or the bounds are not finite with ``y_min < y_max``.
    """
    if c <= 0 or alpha <= 0:
        raise ValueError("c and alpha must be positive")
    if y_init == y_target:
        raise ValueError("y_init and y_target must differ")
    if (y_min is None) != (y_max is None):
        raise ValueError("give both y_min and y_max, or neither")
    lo = min(y_init, y_target) if y_min is None else y_min
    hi = max(y_init, y_target) if y_max is None else y_max
    if not (math.isfinite(lo) and math.isfinite(hi)) or not lo < hi:
        raise ValueError(f"progress bounds must be finite with y_min < y_max, got [{lo}, {hi}]")
    value = parse_score(y)
    if value is None:
        return fail
    num = value - lo if y_target > y_init else hi - value
    u = min(1.0, max(0.0, num / (hi - lo)))
    return c * u**alpha
