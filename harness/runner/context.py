"""What an agent sees: the task, its budget, a seeded RNG and a recorded ``evaluate``."""

from __future__ import annotations

import logging
import random
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

# Re-exported: agents and tests import a run's limits beside the context that carries them.
from harness.budget import Budget as Budget
from harness.budget import BudgetExhausted as BudgetExhausted
from harness.envs.manifest import Direction, Language, MetricSpec, Progress
from harness.envs.subset import SubsetRequest
from harness.evaluation.result import EvalResult, Status


@dataclass(frozen=True)
class TaskSpec:
    """The task as an agent sees it: never the scorer, the data or hidden inputs."""

    env_id: str
    """Variant id."""
    prompt: str
    """Task description for the agent / LLM."""
    initial_program: str
    """Starting program text."""
    language: Language
    """Language of programs (EVOLVE-BLOCK comment syntax)."""
    entry_point: str
    """Function or executable contract the scorer calls."""
    signature: str
    """Human-readable signature of the entry point."""
    direction: Direction
    """Whether the combined score is maximised or minimised."""
    combined: str
    """Name of the combined metric."""
    metrics: tuple[MetricSpec, ...]
    """Reported metrics with their meaning."""
    progress: Progress
    """Progress bounds (y_init, y_target)."""
    mutations: tuple[Any, ...] = ()
    """Offline mutation operators the environment provides (``harness.program.mutate``)."""
    subset_unit: str = ""
    """What a validation subset draws from (e.g. ``workload windows``); empty when the
    environment can only score full evaluations (see ``AgentContext.evaluate(subset=...)``)."""

    @property
    def maximize(self) -> bool:
        """Whether a larger combined score is better."""
        return self.direction is Direction.MAXIMIZE

    def better(self, a: float, b: float) -> bool:
        """Whether score ``a`` is strictly better than ``b``."""
        return a > b if self.maximize else a < b


@dataclass(frozen=True)
class Proposal:
    """A candidate program an agent asks to evaluate, with its lineage and LLM spend."""

    source: str
    """Full program text."""
    parent_id: str | None = None
    """Parent program sha256 (or another id the agent uses), None for roots."""
    thread: int = 0
    """Island / worker index that produced it."""
    iteration: int = 0
    """Agent step that produced it."""
    tokens_in: int = 0
    """LLM prompt tokens spent producing it."""
    tokens_out: int = 0
    """LLM completion tokens spent producing it."""
    cost_usd: float = 0.0
    """LLM cost spent producing it."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form agent notes (kept in memory only)."""


@dataclass(frozen=True)
class Evaluated:
    """A proposal with its result and global sequence number."""

    seq: int
    """0-based evaluation index in the run."""
    proposal: Proposal
    """What was evaluated."""
    result: EvalResult
    """The sandboxed scorer's verdict."""
    replayed: bool = False
    """True when the result came from the journal of a resumed run (not re-evaluated)."""

    @property
    def program_id(self) -> str:
        """sha256 of the program."""
        return self.result.program_sha256

    @property
    def ok(self) -> bool:
        """Whether the candidate was scored."""
        return self.result.status is Status.OK


class AgentContext(ABC):
    """Everything the runner gives an agent. Implemented by the runner."""

    task: TaskSpec
    """The task."""
    budget: Budget
    """The limits."""
    seed: int
    """Master seed of the run."""
    rng: random.Random
    """RNG seeded from ``seed`` (the only randomness an agent should use)."""
    log: logging.Logger
    """Logger for the agent's own messages."""
    workers: int
    """Parallel evaluation slots of the backend (a natural batch size)."""
    run_dir: Path | None
    """The run directory (for agent-owned records such as ``llm_calls.parquet``); None in unit tests."""

    @abstractmethod
    def evaluate(
        self, proposals: Sequence[Proposal], *, subset: SubsetRequest | None = None
    ) -> list[Evaluated]:
        """Evaluate a batch in parallel through the sandbox; every candidate is recorded.

        The batch is cut to the evaluations left in the budget.

        Args:
            proposals: The programs to evaluate.
            subset: Score on this seeded subset of the variant's units instead of the full
                evaluation (only when ``task.subset_unit`` is set). Such evaluations count toward
                the budget and are recorded under the derived variant id, but never as the
                run's best (a subset score is not comparable with full scores).

        Raises:
            BudgetExhausted: If no evaluation, time or cost is left before the batch starts.
            ValueError: If ``subset`` is given and the task cannot score subsets.
        """

    @property
    @abstractmethod
    def remaining_evaluations(self) -> int:
        """Evaluations left in the budget."""

    @abstractmethod
    def out_of_budget(self) -> bool:
        """Whether any budget limit has been reached."""

    @abstractmethod
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Persist agent state (JSON values) so a resumed run can continue from it."""

    @abstractmethod
    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last saved agent state of a resumed run, or None."""

    @property
    @abstractmethod
    def best(self) -> Evaluated | None:
        """Best ok evaluation so far (direction-aware)."""

    @abstractmethod
    def add_llm_usage(self, tokens_in: int, tokens_out: int, cost_usd: float) -> None:
        """Account LLM spend not tied to one proposal (counts toward the cost budget)."""

    def skip_to(self, seq: int) -> None:  # noqa: B027 - optional for contexts without a journal
        """Continue evaluation numbering at ``seq`` (an agent restored from a checkpoint taken there)."""


class Agent(ABC):
    """A search method. Implementations live in the ``agents`` package."""

    name: ClassVar[str] = ""
    """Agent id used on the command line and in results."""
    version: ClassVar[str] = "0"
    """Implementation version recorded in results."""
    description: ClassVar[str] = ""
    """One line for ``bench agents``; LLM-free baselines must say so."""
    uses_llm: ClassVar[bool] = False
    """Whether the agent calls language models."""
    Config: ClassVar[type[BaseModel]]
    """Pydantic model of the agent's configuration (defaults = the method's published values)."""

    def __init__(self, config: BaseModel | None = None) -> None:
        """Bind a configuration (defaults when None)."""
        self.config = config if config is not None else self.Config()

    def models(self) -> dict[str, str]:
        """LLM role -> model string, for the run record (empty for LLM-free agents)."""
        return {}

    def run_summary(self) -> dict[str, Any]:
        """What the agent reports about itself when the run ends (JSON values).

        E.g. a trained adapter's version; stored in ``run.json`` and on the leaderboard row. A
        string under ``headline`` is printed by ``bench run`` as its last line.
        """
        return {}

    def preflight(self) -> None:  # noqa: B027 - optional hook
        """Check the configuration before a run directory is created (e.g. provider keys present).

        Raises:
            ValueError: If the agent cannot run as configured; the message says what to fix.
        """

    @abstractmethod
    def run(self, ctx: AgentContext) -> None:
        """Search until the budget ends (``BudgetExhausted``) or the method decides to stop."""


ProgressCallback = Callable[[Evaluated], None]
