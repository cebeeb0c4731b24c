"""PACE's checkpointed state and the failure taxonomy of one island's attempt."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agents.pacevolve.telemetry import IterationRow

from .controller import Failure
from .front import FailureCategory, ParetoFront
from .prompt_config import PromptConfig


class PACEState(BaseModel):
    """Everything PACE adds to the scaffold's checkpoint."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["fast", "slow"] = "fast"
    """Current timescale."""
    prompt: PromptConfig = PromptConfig()
    """Incumbent prompt configuration P."""
    control: dict[str, Any] = {}
    """Current control logic C (the editable scaffold fields)."""
    front: ParetoFront = ParetoFront()
    """Pareto front of prompt configurations."""
    rounds: int = 0
    """Prompt rounds run."""
    slow_steps: int = 0
    """Slow-timescale steps run."""
    slow_attempts: int = 0
    """Rejected control edits in a row."""
    saturations: int = 0
    """Times the saturation trigger fired."""
    accepted: int = 0
    """Control edits the gate accepted."""
    rejected: int = 0
    """Control edits rejected (before evaluation or by the gate)."""
    rollbacks: int = 0
    """Accepted edits rolled back after the post-commit full evaluation."""
    failures: list[Failure] = []
    """Failures of the last prompt round (for the reflective channel)."""
    failure_counts: dict[str, int] = {}
    """Failure categories of the last prompt round (for the controller's summary)."""


def failure_categories(row: IterationRow, u_best_before: float, u_row: float) -> list[FailureCategory]:
    """PACE's taxonomy for one island's attempt (empty for a success or an infra failure)."""
    if row.outcome.startswith("failed:"):
        stage = row.outcome.split(":", 1)[1]
        return ["extraction_runtime" if stage in ("implementation", "safety") else "format_constraint"]
    if row.outcome in ("repeat", "duplicate"):
        return ["reasoning_content"]
    if row.status in ("error", "timeout"):
        return ["extraction_runtime"]
    if row.status == "invalid":
        return ["format_constraint"]
    if row.status == "ok" and u_row <= u_best_before:
        return ["reasoning_content"]
    return []
