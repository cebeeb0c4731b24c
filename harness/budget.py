"""A run's limits (:class:`Budget`) and the exception that ends it, below both ``llm`` and ``runner``.

The LLM client raises :class:`BudgetExhausted` when the cost limit is reached and the runner
raises it for evaluations and wall time; both import it from here, so neither imports the other.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class BudgetExhausted(Exception):
    """Raised by ``evaluate`` when no evaluation, wall time or LLM cost is left."""


class Budget(BaseModel):
    """Limits of one run; any limit reached ends the run cleanly."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_evaluations: int = Field(default=100, ge=1)
    """Total candidate evaluations (including the initial program)."""
    max_wall_s: float | None = Field(default=None, gt=0)
    """Wall-clock seconds for the whole run (None: unlimited)."""
    max_cost_usd: float | None = Field(default=None, ge=0)
    """LLM spend in US dollars (None: unlimited)."""
