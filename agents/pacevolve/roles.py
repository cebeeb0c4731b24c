"""The advisor / implementer / summariser seam: what each role is asked and what it must return.

PACEvolve++ separates *what to try* (the advisor: idea generation, novelty classification,
hypothesis selection, pruning) from *how to implement it* (the implementer: a code edit). The
agent talks to each role only through these protocols, so a trained advisor, a rule-based one
or a different implementer can replace the LLM-backed defaults of
:mod:`agents.pacevolve.llm_roles` without touching the search loop.

Every method may raise :class:`ProposalError` (the iteration is recorded as a failed proposal
and the search goes on) or the runner's ``BudgetExhausted`` (the run ends cleanly).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from harness.llm.offline.vocabulary import Entry, untried, vocabulary
from harness.runner.context import TaskSpec

from .state import Idea, LogEntry, PrunedIdea


class ProposalError(Exception):
    """A role could not produce a usable answer; the iteration becomes a recorded failed proposal.

    Attributes:
        stage: The stage that failed (``idea_selection``, ``implementation``, ...).
        reason: What went wrong (masked; safe to store).
    """

    def __init__(self, stage: str, reason: str) -> None:
        """Record the failing stage and the reason."""
        super().__init__(f"{stage}: {reason}")
        self.stage = stage
        self.reason = reason


@dataclass(frozen=True)
class IslandView:
    """What a role sees of one island at one step (a read-only copy)."""

    task: TaskSpec
    """The task."""
    island: int
    """Island number."""
    step: int
    """Current step."""
    seed: int
    """Seed for this island and step (roles derive call seeds from it)."""
    program: str
    """The parent program of this iteration."""
    program_score: float | None
    """Its score."""
    best_score: float | None
    """The island's best score so far."""
    ideas: tuple[Idea, ...]
    """The active idea pool."""
    pruned: tuple[PrunedIdea, ...]
    """Pruned ideas (the bounded failure memory)."""
    log: tuple[LogEntry, ...]
    """The newest attempts of the island's context log (what a backtrack unlearned is not here)."""
    log_total: int = 0
    """Length of the whole context log (``log`` may show only its end)."""
    pruned_evicted: int = 0
    """Pruned ideas evicted from the failure memory (no longer in ``pruned``)."""
    tried: frozenset[str] = frozenset()
    """Keys (``edit_key``: the named edit, else the words) of the island's whole log: the
    ``skip_repeats`` filter's keys."""
    known: frozenset[str] = frozenset()
    """sha256 of every program evaluated in the run so far."""

    def edits(self) -> tuple[list[Entry], int]:
        """The numbered edits offered for ``program``, and how many were left out.

        Left out are the edits the search would waste: one whose ``edit <name> <n>`` is in
        ``tried`` (the repeat filter would skip it) or whose program is in ``known``. The prompt
        shows these entries and a constrained advisor can name only them.
        """
        full = vocabulary(self.program, self.task.language.value, self.task.mutations)
        offered = untried(full, self.program, self.tried, self.known)
        return offered, sum(len(e.options) for e in full) - sum(len(e.options) for e in offered)

    def idea(self, idea_id: int) -> Idea | None:
        """The pool idea with this id, if any."""
        return next((i for i in self.ideas if i.id == idea_id), None)


@dataclass(frozen=True)
class Classification:
    """How a proposed idea relates to the pool."""

    kind: Literal["refine", "new", "known_failure"]
    """``refine`` an existing idea, add a ``new`` one, or reject a ``known_failure``."""
    idea_id: int | None
    """The matching pool idea (refine) or pruned idea (known_failure)."""
    description: str
    """The refined or new description (at most two sentences)."""


@dataclass(frozen=True)
class Selection:
    """The idea chosen for this iteration and the concrete hypothesis to test."""

    idea_id: int
    """A pool idea id."""
    hypothesis: str
    """The concrete experiment."""


@dataclass(frozen=True)
class Summary:
    """Condensed experiment records of one idea."""

    description: str
    """The idea's restated description (at most two sentences)."""
    findings: str
    """Key findings: best result, what worked, what did not."""


@runtime_checkable
class Advisor(Protocol):
    """Decides what to try: generates, classifies, selects and prunes ideas."""

    def generate_ideas(self, view: IslandView, n: int) -> list[str]:
        """Propose up to ``n`` conceptual ideas (each a short hypothesis text).

        Raises:
            ProposalError: If no usable idea came back.
        """
        ...

    def classify_idea(self, view: IslandView, proposal: str) -> Classification:
        """Decide whether ``proposal`` refines a pool idea, is new, or repeats a pruned failure.

        Raises:
            ProposalError: If no usable answer came back.
        """
        ...

    def select_hypothesis(self, view: IslandView) -> Selection:
        """Pick a pool idea and write the concrete hypothesis to test next.

        Raises:
            ProposalError: If no usable answer came back.
        """
        ...

    def is_repeat(self, view: IslandView, selection: Selection) -> bool:
        """Whether the hypothesis repeats an experiment in the global log (optional LLM filter).

        Raises:
            ProposalError: If no usable answer came back.
        """
        ...

    def choose_pruned(self, view: IslandView, n_drop: int) -> tuple[list[int], str]:
        """Pick ``n_drop`` pool ideas to discard, with a one-line reason.

        Raises:
            ProposalError: If no usable answer came back.
        """
        ...


@runtime_checkable
class Implementer(Protocol):
    """Decides how to implement: turns a hypothesis into a new program."""

    def implement(self, view: IslandView, idea: Idea, selection: Selection) -> str:
        """Return the full edited program (text outside EVOLVE-BLOCKs unchanged).

        Raises:
            ProposalError: If no applicable edit came back within the allowed fixes.
        """
        ...


@runtime_checkable
class Summariser(Protocol):
    """Condenses an idea's accumulated experiment records into key findings."""

    def summarize(self, view: IslandView, idea: Idea) -> Summary:
        """Summarise ``idea.history``.

        Raises:
            ProposalError: If no usable answer came back.
        """
        ...
