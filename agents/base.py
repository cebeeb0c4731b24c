"""The one interface every agent implements (re-exported from the harness runner)."""

from harness.runner.context import (
    Agent,
    AgentContext,
    Budget,
    BudgetExhausted,
    Evaluated,
    Proposal,
    TaskSpec,
)

__all__ = ["Agent", "AgentContext", "Budget", "BudgetExhausted", "Evaluated", "Proposal", "TaskSpec"]
