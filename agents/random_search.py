"""Offline baseline: random mutation search. NOT an LLM agent.

Each step it picks parents by tournament among the best programs seen so far, applies one to
three random mutation operators (the environment's task-specific ones plus generic numeric and
comparison tweaks) inside the EVOLVE-BLOCKs, and evaluates a batch in parallel. It exists so the
whole chain (sandbox, scorer, results, leaderboard, resume) runs with no network and no API key,
and as the floor any LLM-driven method should beat.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from harness.program.mutate import generic_operators, mutate

from .base import Agent, AgentContext, Evaluated, Proposal


class RandomSearchConfig(BaseModel):
    """Configuration of the random-search baseline."""

    model_config = ConfigDict(extra="forbid")

    batch_size: int = Field(default=0, ge=0)
    """Candidates per step (0: one per worker, at least 2)."""
    tournament: int = Field(default=3, ge=1)
    """Tournament size for parent selection among the population."""
    population: int = Field(default=16, ge=1)
    """How many of the best programs stay eligible as parents."""
    max_ops: int = Field(default=3, ge=1)
    """Mutation operators applied per child (1..max_ops, uniform)."""
    generic_ops: bool = True
    """Also use the generic numeric-literal and comparison operators."""


class RandomSearchAgent(Agent):
    """Random mutation search over environment-provided operators (no LLM)."""

    name: ClassVar[str] = "random-search"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = "Offline baseline, NOT an LLM: random mutations of the best programs."
    uses_llm: ClassVar[bool] = False
    Config: ClassVar[type[BaseModel]] = RandomSearchConfig

    def run(self, ctx: AgentContext) -> None:
        """Evaluate the initial program, then mutate the best ones until the budget ends."""
        cfg = self.config
        assert isinstance(cfg, RandomSearchConfig)
        task = ctx.task
        ops: list[Any] = list(task.mutations) + (generic_operators() if cfg.generic_ops else [])
        batch = cfg.batch_size or max(2, ctx.workers)
        pop: list[Evaluated] = []
        iteration = 0
        first = ctx.evaluate([Proposal(source=task.initial_program, iteration=0)])
        pop.extend(e for e in first if e.ok)
        while not ctx.out_of_budget():
            iteration += 1
            proposals = []
            for thread in range(batch):
                parent_src, parent_id = self._pick_parent(ctx, pop, cfg)
                child = parent_src
                for _ in range(ctx.rng.randint(1, cfg.max_ops)):
                    out = mutate(child, ctx.rng, task.language.value, ops)
                    if out is not None:
                        child = out[1]
                proposals.append(
                    Proposal(source=child, parent_id=parent_id, thread=thread, iteration=iteration)
                )
            results = ctx.evaluate(proposals)
            pop.extend(e for e in results if e.ok)
            pop.sort(key=lambda e: e.result.score or 0.0, reverse=task.maximize)
            del pop[cfg.population :]

    @staticmethod
    def _pick_parent(
        ctx: AgentContext, pop: list[Evaluated], cfg: RandomSearchConfig
    ) -> tuple[str, str | None]:
        if not pop:
            return ctx.task.initial_program, None
        contenders = [ctx.rng.choice(pop) for _ in range(cfg.tournament)]
        best = contenders[0]
        for c in contenders[1:]:
            if ctx.task.better(c.result.score or 0.0, best.result.score or 0.0):
                best = c
        return best.proposal.source, best.program_id
