"""The two decisions of PACE's controller, as pure functions.

The saturation trigger (with the same-round estimate of ΔÛ_P) and the validation gate with its
post-commit rollback check, all on the progress scale u in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .prompt_config import PromptConfig


@dataclass(frozen=True)
class Saturation:
    """Outcome of the saturation trigger after a prompt round."""

    delta_u: float
    """ΔÛ_P: validated progress after the round minus before it."""
    epsilon: float
    """ε."""
    rule: Literal["le", "lt"]
    """Comparison used (``le``: ΔÛ_P <= ε saturates; ``lt``: ΔÛ_P < ε)."""
    saturated: bool
    """Whether prompt evolution is saturated (switch to the slow timescale)."""


def saturation(
    u_before: float, u_after: float, epsilon: float, rule: Literal["le", "lt"] = "le"
) -> Saturation:
    """Apply the trigger: saturated when ΔÛ_P <= ε (``le``) or ΔÛ_P < ε (``lt``).

    Raises:
        ValueError: If a progress value is not finite or ``rule`` is unknown.
    """
    for v in (u_before, u_after, epsilon):
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError("progress values must be finite")
    d = u_after - u_before
    if rule == "le":
        sat = d <= epsilon
    elif rule == "lt":
        sat = d < epsilon
    else:
        raise ValueError(f"unknown saturation rule {rule!r}")
    return Saturation(d, epsilon, rule, sat)


@dataclass(frozen=True)
class GateDecision:
    """Outcome of the validation gate."""

    u_old: float | None
    """Incumbent's progress on the validation subset (None: not evaluated / failed)."""
    u_new: float | None
    """Candidate's progress on the same subset (None: no candidate or it failed)."""
    delta: float
    """δ."""
    accepted: bool
    """Whether the control edit is committed."""
    reason: str
    """Why (one line)."""


def gate(
    u_old: float | None, u_new: float | None, delta: float, *, tokens: int = 0, budget: int | None = None
) -> GateDecision:
    """Accept iff the candidate beats the incumbent by more than δ on the same subset.

    The step's token cost must also be within the budget. A failed incumbent counts as u = 0;
    a failed or missing candidate is rejected.
    """
    if budget is not None and tokens > budget:
        return GateDecision(u_old, u_new, delta, False, f"over the token budget ({tokens} > {budget})")
    if u_new is None:
        return GateDecision(u_old, u_new, delta, False, "no scored candidate under the new control logic")
    base = 0.0 if u_old is None else u_old
    margin = u_new - base
    if margin > delta:
        return GateDecision(u_old, u_new, delta, True, f"u_new - u_old = {margin:.4f} > δ = {delta}")
    return GateDecision(u_old, u_new, delta, False, f"u_new - u_old = {margin:.4f} <= δ = {delta}")


def should_roll_back(baseline_u: float, full_u: float | None) -> bool:
    """Post-commit check: whether to roll back a committed edit.

    True when the committed candidate's full evaluation failed or is below the incumbent's
    full-evaluation baseline (a negative full-eval delta).
    """
    return full_u is None or full_u - baseline_u < 0.0


def round_estimate(
    old: PromptConfig,
    new: PromptConfig,
    configs: list[PromptConfig],
    island_u: list[float],
    front_u: float | None,
) -> tuple[float, float]:
    """(Û(A(P_{t−1}, C)), Û(A(P_t, C))) measured in one prompt round (the paper's ΔÛ_P).

    P_{t−1} is measured by the island that ran it (island 0), P_t by the island that ran it this
    round, or by its front entry when it is an older member; the same configuration gives ΔÛ_P = 0.

    Args:
        old: P_{t−1}, the incumbent the round started from.
        new: P_t, the incumbent after the round.
        configs: The configuration each island ran this round (island order).
        island_u: The u each island's program reached this round (0 for no program).
        front_u: P_t's u on the front (used when no island ran it this round).

    Returns:
        The two estimates.
    """
    measured = dict(zip((c.key() for c in configs), island_u, strict=False))
    u_old = measured.get(old.key(), island_u[0] if island_u else 0.0)
    if new.key() == old.key():
        return u_old, u_old
    return u_old, measured.get(new.key(), front_u if front_u is not None else u_old)
