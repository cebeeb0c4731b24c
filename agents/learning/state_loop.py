"""Same-state groups (``group = same-state``): the loop of the original ThetaEvolve and TTT-Discover.

Each step picks ``states_per_step`` parent programs from an archive of scored programs (PUCT
with ``state_reuse = puct``; otherwise the same archive ranked greedily, c = 0) and draws
``group_size`` candidates from each: with target ``advisor`` the policy writes a hypothesis that
the frozen implementer turns into code; with ``end-to-end`` the policy writes the edit itself.
Every state's candidates form one group for the estimator. Resumable like the scaffold: the
checkpoint holds the archive, its programs and the trainer step it goes with.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict

from agents.base import AgentContext, Proposal
from agents.pacevolve.agent import FLUSH_EVERY_S
from agents.pacevolve.llm_roles import LLMImplementer
from agents.pacevolve.roles import Implementer, IslandView, ProposalError, Selection
from agents.pacevolve.state import Idea, derive_seed
from agents.rl.diagnostics import TrainRow
from agents.rl.trainer import Trainer
from harness.evaluation.result import program_sha256
from harness.llm import LLMClient
from harness.llm.ledger import LLMCallRow
from harness.llm.offline import register_operators

from .config import LearningConfig
from .policy_roles import PolicyAdvisor, PolicyImplementer, PolicySampler, RolloutBuffer
from .probe import PolicyProbe
from .puct import PUCTArchive
from .values import archive_value, exact_edits, reward_of

GOAL = "Improve the program's combined score; propose one concrete change to the EVOLVE-BLOCK code."
"""The single idea a same-state prompt offers (there is no idea pool in this loop)."""


class SameStateAgent(Protocol):
    """What the loop uses of its :class:`~agents.learning.agent.LearningAgent`.

    Typed here so that the agent module imports this one and not the other way round.
    """

    _policy_advisor: PolicyAdvisor | None
    _policy_implementer: PolicyImplementer | None
    archive: PUCTArchive | None
    last_row: TrainRow | None
    _probe: PolicyProbe

    @property
    def name(self) -> str:
        """The registered agent name (for log lines)."""

    @property
    def lcfg(self) -> LearningConfig:
        """The typed configuration."""

    @property
    def trainer(self) -> Trainer | None:
        """The policy's trainer (set by ``setup_policy``)."""

    @property
    def _buffer(self) -> RolloutBuffer: ...

    def _client(self, ctx: AgentContext) -> LLMClient: ...

    def setup_policy(self, ctx: AgentContext, on_call: Any) -> PolicySampler:
        """Build the sampler and trainer of the policy; return the sampler."""


class SameStateCheckpoint(BaseModel):
    """What a resumed same-state run needs besides the trainer's own checkpoint."""

    model_config = ConfigDict(extra="forbid")

    step: int = 0
    """Steps completed."""
    base_seed: int
    """Seed all per-step, per-sample seeds derive from."""
    programs: dict[str, str] = {}
    """sha256 -> text of every program in the archive."""
    known: dict[str, float | None] = {}
    """sha256 -> score (None: not ok) of every program evaluated."""
    archive: str = ""
    """The archive (``PUCTArchive.to_json``)."""
    trainer_step: int = 0
    """The trainer step this state goes with."""


def _archive(agent: SameStateAgent, ctx: AgentContext, known: dict[str, float | None]) -> PUCTArchive:
    cfg = agent.lcfg
    c = cfg.puct_c if cfg.state_reuse == "puct" else 0.0
    archive = PUCTArchive(c=c, children_per_parent=cfg.puct_children_per_parent, capacity=cfg.puct_capacity)
    sha = program_sha256(ctx.task.initial_program)
    archive.add_seed(sha, archive_value(ctx.task, known.get(sha)))
    return archive


def run_same_state(agent: SameStateAgent, ctx: AgentContext) -> None:
    """Search and train with same-state groups until the budget ends.

    Raises:
        BudgetExhausted: When the budget runs out.
        ValueError: If the sampler cannot run here or the reward bounds are degenerate.
    """
    cfg = agent.lcfg
    register_operators(ctx.task.env_id, list(ctx.task.mutations))
    client = agent._client(ctx)
    client.check_environment()

    def on_call(row: LLMCallRow) -> None:
        client.ledger.record(row)

    sampler = agent.setup_policy(ctx, on_call)
    advisor = PolicyAdvisor(
        sampler,
        max_new_tokens=cfg.policy_max_new_tokens,
        lenient=cfg.lenient_parsing,
        novelty_hint_pool_size=0,
        constrained=cfg.constrained_decoding,
        exact_edits=exact_edits(cfg),
    )
    agent._policy_advisor = advisor
    implementer: Implementer
    if cfg.target == "end-to-end":
        implementer = agent._policy_implementer = PolicyImplementer(
            sampler, max_new_tokens=4 * cfg.policy_max_new_tokens, constrained=cfg.constrained_decoding
        )
    else:
        implementer = LLMImplementer(client, max_fix_attempts=cfg.max_fix_attempts)
    trainer = agent.trainer
    assert trainer is not None

    data = ctx.load_checkpoint()
    if data:
        ctx.skip_to(int(data.pop("_seq", 0)))
        st = SameStateCheckpoint.model_validate(data)
        trainer.restore_step(st.trainer_step)
        archive = PUCTArchive.from_json(st.archive)
        ctx.log.info("%s: resumed at step %d", agent.name, st.step)
    else:
        trainer.restore_step(0)
        first = ctx.evaluate([Proposal(source=ctx.task.initial_program, iteration=0)])
        sha = program_sha256(ctx.task.initial_program)
        st = SameStateCheckpoint(base_seed=ctx.rng.getrandbits(31))
        st.programs[sha] = ctx.task.initial_program
        st.known[sha] = first[0].result.score if first and first[0].ok else None
        archive = _archive(agent, ctx, st.known)
        st.archive = archive.to_json()
        ctx.save_checkpoint(st.model_dump(mode="json"))
    agent.archive = archive
    idea = Idea(id=1, description=GOAL)
    last_flush = time.monotonic()
    empty = 0
    try:
        while not ctx.out_of_budget():
            st.step += 1
            parents = archive.select(cfg.states_per_step, allow_repeats=True)
            drafts: list[tuple[int, str, str | None]] = []  # (group, parent sha, program)
            known = frozenset(st.known)
            for g, parent in enumerate(parents):
                for j in range(cfg.group_size):
                    idx = g * cfg.group_size + j
                    score = st.known.get(parent)
                    view = IslandView(
                        task=ctx.task, island=idx, step=st.step, seed=derive_seed(st.base_seed, st.step, idx),
                        program=st.programs[parent], program_score=score, best_score=score,
                        ideas=(idea,), pruned=(), log=(), known=known,
                    )  # fmt: skip
                    try:
                        sel = (
                            advisor.select_hypothesis(view) if cfg.target == "advisor" else Selection(1, GOAL)
                        )
                        drafts.append((g, parent, implementer.implement(view, idea, sel)))
                    except ProposalError:
                        drafts.append((g, parent, None))
            new: dict[str, Proposal] = {}
            for idx, (_, parent, program) in enumerate(drafts):
                if program is None:
                    continue
                sha = program_sha256(program)
                if sha not in st.known and sha not in new:
                    new[sha] = Proposal(source=program, parent_id=parent, thread=idx, iteration=st.step)
            evaluated = ctx.evaluate(list(new.values())) if new else []
            for ev in evaluated:
                st.known[program_sha256(ev.proposal.source)] = ev.result.score if ev.ok else None
            cut = {program_sha256(p.source) for p in list(new.values())[len(evaluated) :]}
            calls = agent._buffer.take(st.step)
            groups: list[list[list[Any]]] = [[] for _ in parents]
            rewards: list[list[float]] = [[] for _ in parents]
            for idx, (g, parent, program) in enumerate(drafts):
                key = program_sha256(program) if program is not None else None
                if key in cut:
                    continue  # the budget ended before it was evaluated
                score = st.known.get(key) if key is not None else None
                reward = reward_of(cfg, ctx.task, score)
                groups[g].append(calls.get(idx, []))
                rewards[g].append(reward)
                if key is not None and score is not None and program is not None:
                    st.programs.setdefault(key, program)
                    archive.record(parent, key, archive_value(ctx.task, score))
                else:
                    archive.record(parent, None, None)
            archive.flush()
            keep = set(archive.keys())
            st.programs = {k: v for k, v in st.programs.items() if k in keep}
            for group, group_rewards in zip(groups, rewards, strict=True):
                agent._probe.offer(st.step, group, group_rewards)  # not in this loop's checkpoint
            agent.last_row = trainer.update_candidates(
                groups, [np.asarray(r, dtype=np.float64) for r in rewards]
            )
            st.archive = archive.to_json()
            st.trainer_step = trainer.step
            ctx.save_checkpoint(st.model_dump(mode="json"))
            empty = 0 if new else empty + 1
            if empty >= cfg.max_empty_steps:
                ctx.log.warning("%s: no candidate in %d consecutive steps; stopping", agent.name, empty)
                break
            if time.monotonic() - last_flush > FLUSH_EVERY_S:
                client.ledger.flush()
                last_flush = time.monotonic()
    finally:
        client.ledger.flush()
