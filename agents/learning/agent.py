"""The learning agents: PACEvolve's scaffold with an online-trained policy (one implementation, four presets).

Group ``across-islands`` (the default): every step each island drafts one candidate, the trained
policy answering the advisor stages (and, with target ``end-to-end``, writing the edit); the
step's candidates are evaluated as one batch and absorbed by their islands; then, at the step's
synchronisation point, each candidate's reward (progress-normalised, ``reward_fail`` for a failed
or missing candidate) becomes its advantage within the step's group, broadcast to every token the
policy wrote for it, and the adapter takes one optimiser step. The scaffold's checkpoint names
the trainer step it goes with, so a run killed between the two writes resumes consistently.

Group ``same-state`` runs :mod:`agents.learning.state_loop` instead (the originals' loop).
"""

from __future__ import annotations

import importlib.util
import math
import tempfile
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from agents.base import AgentContext
from agents.pacevolve.agent import PACEvolveAgent
from agents.pacevolve.island import Draft, IslandEngine, Result
from agents.pacevolve.roles import Advisor, Implementer, Summariser
from agents.pacevolve.state import IslandState, ProgramRef, SearchState
from agents.rl.diagnostics import TrainRow
from agents.rl.policy import PolicyLoadError, check_reference
from agents.rl.trainer import Trainer
from harness.evaluation.result import program_sha256
from harness.llm import LLMClient, LLMSettings
from harness.llm.ledger import LLMCallRow

from .bandit import BanditAdvisor
from .config import LearningConfig, MaxKConfig, PACEvolvePPConfig, ThetaEvolveConfig, TTTDiscoverConfig
from .gpu_plan import GpuPlan, plan_gpus
from .lockstep import run_all
from .policy_backend import build_backend, build_trainer, policy_work, resolve_sampler
from .policy_roles import PolicyAdvisor, PolicyImplementer, PolicySampler, RolloutBuffer
from .probe import PROBE_ANSWERS, PolicyProbe
from .puct import PUCTArchive
from .values import archive_value, exact_edits, reward_of

STATE_DIRNAME = "policy"
"""Directory inside the run directory with the trainer's checkpoints (adapter, optimiser)."""
DEFAULT_STEPS = 50
"""Planned steps (alpha ramp) when the budget has no evaluation cap and none is configured."""


def policy_advisor(cfg: LearningConfig, sampler: PolicySampler) -> PolicyAdvisor:
    """The policy's advisor role with the configured parsing and answer formats."""
    return PolicyAdvisor(
        sampler,
        max_new_tokens=cfg.policy_max_new_tokens,
        lenient=cfg.lenient_parsing,
        novelty_hint_pool_size=cfg.novelty_hint_pool_size,
        constrained=cfg.constrained_decoding,
        exact_edits=exact_edits(cfg),
    )


def _as_float(value: object) -> float:
    return float(value) if isinstance(value, int | float) else math.nan


def learning_summary(
    step_rewards: list[float], label: str = "search progress (no frozen reference)"
) -> dict[str, Any]:
    """Mean step reward over the first and the last quarter of the steps, and a line saying so.

    ``label`` opens the line (a bandit advisor's says that it learns no weights). A search that
    improves anyway raises it too; the trained policy's learning line is :mod:`.probe`'s.

    A quarter is ``max(1, steps // 4)`` steps; steps without a finite reward (no group) are left out.
    Empty when no step has a reward.
    """
    rewards = [r for r in step_rewards if math.isfinite(r)]
    if not rewards:
        return {}
    q = max(1, len(rewards) // 4)
    first, last = float(np.mean(rewards[:q])), float(np.mean(rewards[-q:]))
    return {
        "reward_first_quarter": first,
        "reward_last_quarter": last,
        "headline": (
            f"{label}: mean step reward {first:.3f} in the first quarter -> {last:.3f} in the last "
            f"({len(rewards)} steps, {q} per quarter)"
        ),
    }


def planned_steps(cfg: LearningConfig, ctx: AgentContext) -> int:
    """Steps the run is expected to take (the length of the alpha ramp)."""
    if cfg.total_steps is not None:
        return cfg.total_steps
    cap = ctx.budget.max_evaluations
    if cap is None:
        return DEFAULT_STEPS
    return max(1, math.ceil(max(1, cap - 1) / cfg.candidates_per_step()))


class _PUCTEngine(IslandEngine):
    """An island engine whose parents come from the agent's PUCT assignment for the step."""

    def __init__(self, *args: Any, assignment: dict[int, ProgramRef], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.assignment = assignment

    def _choose_parent(self, isl: IslandState, step: int) -> tuple[ProgramRef, str, int]:
        # the scaffold's own choice still runs for its side effects (a backtrack restores the pool)
        parent, source, restored = super()._choose_parent(isl, step)
        chosen = self.assignment.get(isl.index)
        if chosen is None:
            return parent, source, restored
        return chosen, "puct", restored


class LearningAgent(PACEvolveAgent):
    """Base of the four presets (not registered itself)."""

    name: ClassVar[str] = ""
    version: ClassVar[str] = "1.0.0"
    uses_llm: ClassVar[bool] = True
    Config: ClassVar[type[BaseModel]] = LearningConfig

    def __init__(self, config: BaseModel | None = None, **kwargs: Any) -> None:
        """Bind a configuration (the preset's defaults when None)."""
        super().__init__(config, **kwargs)
        self.trainer: Trainer | None = None
        self.archive: PUCTArchive | None = None
        self.last_row: TrainRow | None = None
        self.sampler_name = ""
        self._policy_advisor: PolicyAdvisor | None = None
        self._bandit: BanditAdvisor | None = None
        self._policy_implementer: PolicyImplementer | None = None
        self._sampler: PolicySampler | None = None
        self._buffer = RolloutBuffer()
        self._probe = PolicyProbe(PROBE_ANSWERS)
        self._assignment: dict[int, ProgramRef] = {}
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self.gpu_plan: GpuPlan | None = None

    @property
    def lcfg(self) -> LearningConfig:
        """The typed configuration."""
        assert isinstance(self.config, LearningConfig)
        return self.config

    # -- models and checks ------------------------------------------------------------------------
    def llm_models(self) -> dict[str, str]:
        """The roles served through litellm (the trained ones are not)."""
        return {r: m for r, m in self.models().items() if not m.startswith(("policy:", "rule:"))}

    def preflight(self) -> None:
        """Fail before the run when the sampler cannot run here or a provider key is missing.

        Raises:
            ValueError: If a GPU path was asked for on a machine without one (the message names
                the CPU alternative), or the policy reference cannot be resolved.
            LLMConfigError: If a frozen role's provider key is missing.
        """
        client = LLMClient(self.llm_models(), LLMSettings(params=dict(self.cfg.litellm_params)))
        if self.lcfg.bandit:  # no policy to load
            client.check_environment()
            return
        missing = [m for m in ("transformers", "peft") if importlib.util.find_spec(m) is None]
        if missing:
            raise ValueError(f"the learning agents need {' and '.join(missing)}: pip install 'evobench[rl]'")
        resolve_sampler(self.lcfg)
        try:
            check_reference(str(self.lcfg.advisor_model))
        except PolicyLoadError as e:
            raise ValueError(str(e)) from None
        client.check_environment()

    def plan_gpu_memory(
        self, gpus: dict[int, int], eval_bytes: int | None, eval_slots: int
    ) -> GpuPlan | None:
        """Plan GPU memory between the policy and the evaluations (``agents/learning/gpu_plan.py``).

        Args:
            gpus: Host GPU number -> total bytes of the GPUs this run may use.
            eval_bytes: One evaluation's declared GPU memory (``hardware.gpu_memory_gib``), or None.
            eval_slots: Evaluations at once on this machine's GPUs (0: they use none of them).

        Returns:
            The plan (also kept for :meth:`setup_policy`), or None when the learner runs on the CPU.

        Raises:
            ValueError: If a GPU path was asked for on a machine without one.
            agents.learning.gpu_plan.GpuPlanError: If the policy and evaluations cannot fit.
        """
        work = None if self.lcfg.bandit else policy_work(self.lcfg)
        self.gpu_plan = None if work is None else plan_gpus(gpus, work, eval_bytes, eval_slots)
        return self.gpu_plan

    def run_summary(self) -> dict[str, Any]:
        """Adapter version, trainer steps, skipped updates and format fallbacks (for run.json)."""
        out: dict[str, Any] = {} if self._bandit is not None else {"sampler": self.sampler_name}
        if self.gpu_plan is not None:
            out["gpu_plan"] = list(self.gpu_plan.lines)
        if self.trainer is not None:
            rows = self.trainer.log.rows
            out.update(
                adapter_version=self.trainer.backend.adapter_version,
                train_steps=self.trainer.step,
                skipped_updates=sum(bool(r.get("skipped")) for r in rows),
            )
        if self._policy_advisor is not None:
            out["advisor_fallbacks"] = dict(self._policy_advisor.fallbacks)
            out["parse_rate"] = self._policy_advisor.parse_rates()
        if self._policy_implementer is not None and self._policy_implementer.calls:
            impl = self._policy_implementer
            out.setdefault("parse_rate", {})["implementation"] = (impl.calls - impl.failures) / impl.calls
        if self._sampler is not None and self._sampler.lockstep.batch_sizes:
            sizes = self._sampler.lockstep.batch_sizes
            out["policy_batches"] = {"batches": len(sizes), "mean_size": sum(sizes) / len(sizes)}
        if self.trainer is not None:
            out.update(learning_summary([_as_float(r.get("reward_mean")) for r in self.trainer.log.rows]))
            out.update(self._probe_summary(out.get("headline")))
        if self._bandit is not None:
            out["advisor"] = f"{self.lcfg.advisor_rule} (a count-based bandit: no weights are learned)"
            out["bandit_pulls"] = self._bandit.pulls()
            out.update(
                learning_summary(self._bandit.step_rewards, f"{self.lcfg.advisor_rule}, no weights learned")
            )
        return out

    def _probe_summary(self, progress: object) -> dict[str, Any]:
        """The policy probe's result; its line is the headline's last (after the search progress)."""
        assert self.trainer is not None
        result = self._probe.measure(
            self.trainer.backend, self.lcfg.policy_temperature, untrained=self.lcfg.lr == 0
        )
        if result is None:
            line = (
                "learning (policy vs its frozen twin): not measured, the recorded answers lack "
                "both above- and below-mean candidates (no group's rewards differed)"
            )
            out: dict[str, Any] = {"policy_probe": None}
        else:
            line = result.headline()
            out = {"policy_probe": {k: v for k, v in asdict(result).items() if k != "steps"}}
            out["policy_probe"]["steps"] = list(result.steps)
        out["headline"] = f"{progress}\n{line}" if isinstance(progress, str) else line
        return out

    def progress_fields(self) -> dict[str, str]:
        """Step, last mean reward and adapter version for the progress bar."""
        row = self.last_row
        if row is None:
            return {}
        reward = "-" if not math.isfinite(row.reward_mean) else f"{row.reward_mean:.3f}"
        return {"step": str(row.step), "reward": reward, "adapter": f"v{row.adapter_version}"}

    # -- policy wiring ----------------------------------------------------------------------------
    def _work_dir(self, ctx: AgentContext) -> Path:
        if ctx.run_dir is not None:
            return ctx.run_dir
        if self._tmp is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="evobench-policy-")
        return Path(self._tmp.name)

    def setup_policy(self, ctx: AgentContext, on_call: Any) -> PolicySampler:
        """Load the policy, its backend and trainer.

        A checkpoint is applied on restore; a fresh run resets the trainer's files in ``_start``.

        Raises:
            ValueError: If the sampler cannot run here.
            agents.rl.policy.PolicyLoadError: If the policy cannot be loaded.
        """
        import torch

        cfg = self.lcfg
        seed = ctx.seed
        run_dir = self._work_dir(ctx)
        torch.set_num_threads(cfg.policy_threads)  # samples depend on the reduction order
        backend, policy, self.sampler_name = build_backend(
            cfg, int(seed), run_dir / STATE_DIRNAME, self.gpu_plan
        )
        ctx.log.info(
            "%s: policy %s on %s sampler (%s)",
            self.name,
            cfg.advisor_model,
            self.sampler_name,
            "transformers" if self.sampler_name == "hf" else "vLLM",
        )
        self.trainer = build_trainer(
            cfg, backend, run_dir, run_dir / STATE_DIRNAME, int(seed), planned_steps(cfg, ctx)
        )
        return PolicySampler(
            backend,
            policy,
            reference=str(cfg.advisor_model),
            temperature=cfg.policy_temperature,
            max_prompt_tokens=cfg.max_prompt_tokens,
            buffer=self._buffer,
            on_call=on_call,
        )

    def _roles(self, ctx: AgentContext, client: LLMClient) -> tuple[Advisor, Implementer, Summariser]:
        cfg = self.lcfg
        if cfg.bandit:
            _, implementer, summariser = super()._roles(ctx, client)  # the frozen roles
            self._bandit = BanditAdvisor(
                seed=int(ctx.seed),
                c=cfg.bandit_c,
                reward_lo=cfg.reward_fail,
                reward_hi=cfg.reward_c,
                menu=cfg.bandit_menu,
            )
            return self._bandit, implementer, summariser

        def on_call(row: LLMCallRow) -> None:
            client.ledger.record(row)
            self._attribute(row)

        sampler = self.setup_policy(ctx, on_call)
        self._sampler = sampler
        self._policy_advisor = policy_advisor(cfg, sampler)
        _, implementer, summariser = super()._roles(ctx, client)  # the frozen roles
        if cfg.target == "end-to-end":
            implementer = self._policy_implementer = PolicyImplementer(
                sampler, max_new_tokens=4 * cfg.policy_max_new_tokens, constrained=cfg.constrained_decoding
            )
        return self._policy_advisor, implementer, summariser

    def _draft_all(self, engine: IslandEngine, state: SearchState, step: int) -> list[Draft]:
        """Every island drafts on its own thread; their policy calls are batched in lockstep."""
        if self._sampler is None or not self.lcfg.batch_policy_calls or len(state.islands) < 2:
            return super()._draft_all(engine, state, step)
        return run_all(
            lambda isl: engine.draft(isl, step), state.islands, lambda isl: isl.index, self._sampler.lockstep
        )

    def _engine(
        self,
        ctx: AgentContext,
        state: SearchState,
        advisor: Advisor,
        implementer: Implementer,
        summariser: Summariser,
    ) -> IslandEngine:
        if self.lcfg.state_reuse != "puct":
            return super()._engine(ctx, state, advisor, implementer, summariser)
        return _PUCTEngine(
            ctx.task, self.cfg, state, advisor, implementer, summariser, ctx.log, assignment=self._assignment
        )

    # -- checkpoints ------------------------------------------------------------------------------
    def _snapshot(self, state: SearchState) -> dict[str, Any]:
        data = super()._snapshot(state)
        if self._bandit is not None:
            data["bandit"] = self._bandit.to_json()
            data["learning"] = {"puct": self.archive.to_json() if self.archive is not None else None}
            return data
        assert self.trainer is not None
        data["learning"] = {
            "trainer_step": self.trainer.step,
            "puct": self.archive.to_json() if self.archive is not None else None,
            "fallbacks": dict(self._policy_advisor.fallbacks) if self._policy_advisor else {},
            "calls": dict(self._policy_advisor.calls) if self._policy_advisor else {},
            "probe": self._probe.to_json(),
        }
        return data

    def _start(self, ctx: AgentContext) -> SearchState:
        if self.trainer is not None:
            self.trainer.restore_step(0)  # a fresh run: drop what an earlier attempt may have left
        return super()._start(ctx)

    def _restore_extra(self, data: dict[str, Any]) -> None:
        bandit = data.pop("bandit", None)
        if bandit is not None and self._bandit is not None:
            self._bandit.load_json(bandit)
        extra = data.pop("learning", None)
        if not extra:
            return
        if self.trainer is not None:
            self.trainer.restore_step(int(extra["trainer_step"]))
        if extra.get("puct") is not None:
            self.archive = PUCTArchive.from_json(extra["puct"])
        if self._policy_advisor is not None:
            self._policy_advisor.fallbacks.update(extra.get("fallbacks") or {})
            self._policy_advisor.calls.update(extra.get("calls") or {})
        self._probe.load_json(extra.get("probe") or [])

    # -- the step ---------------------------------------------------------------------------------
    def run(self, ctx: AgentContext) -> None:
        """Search and train until the budget ends.

        Raises:
            BudgetExhausted: When the evaluation, time or cost budget runs out.
            ValueError: If the sampler cannot run here or the reward bounds are degenerate.
        """
        if self.lcfg.group == "same-state":
            from .state_loop import run_same_state

            run_same_state(self, ctx)
            return
        super().run(ctx)

    def _ensure_archive(self, ctx: AgentContext, state: SearchState) -> PUCTArchive:
        if self.archive is None:
            cfg = self.lcfg
            self.archive = PUCTArchive(
                c=cfg.puct_c, children_per_parent=cfg.puct_children_per_parent, capacity=cfg.puct_capacity
            )
            sha = program_sha256(ctx.task.initial_program)
            self.archive.add_seed(sha, archive_value(ctx.task, state.known.get(sha)))
        return self.archive

    def _step(self, ctx: AgentContext, state: SearchState, engine: IslandEngine) -> list[Any]:
        self._assignment.clear()
        if self.lcfg.state_reuse == "puct":
            archive = self._ensure_archive(ctx, state)
            keys = archive.select(len(state.islands), allow_repeats=True)
            for i, key in zip(range(len(state.islands)), keys, strict=False):
                self._assignment[i] = ProgramRef(sha=key, score=state.known.get(key))
        return super()._step(ctx, state, engine)

    def _after_step(
        self, ctx: AgentContext, state: SearchState, drafts: list[Draft], results: dict[int, Result]
    ) -> None:
        cfg = self.lcfg
        calls = self._buffer.take(state.step)
        candidates, rewards, by_island = [], [], {}
        archive = self.archive if cfg.state_reuse == "puct" else None
        for d in drafts:
            if d.outcome == "budget":
                continue  # never evaluated: no reward exists for it
            r = results.get(d.island)
            score = r.score if r is not None and r.ok else None
            reward = reward_of(cfg, ctx.task, score)
            candidates.append(calls.get(d.island, []))
            rewards.append(reward)
            by_island[d.island] = reward
            if archive is not None and d.parent.sha in archive:
                child = r.ref.sha if r is not None and score is not None else None
                value = archive_value(ctx.task, score) if child is not None else None
                archive.record(d.parent.sha, child, value)
        if archive is not None:
            archive.flush()
            state.pinned = sorted(archive.keys())
        if self._bandit is not None:  # counts and sums only: no weights
            self._bandit.observe(state.step, by_island)
            return
        assert self.trainer is not None
        self._probe.offer(state.step, candidates, rewards)
        self.last_row = self.trainer.update_candidates([candidates], [np.asarray(rewards, dtype=np.float64)])
        if self.last_row.skipped:
            ctx.log.info("%s: step %d update skipped: %s", self.name, state.step, self.last_row.skip_reason)


class PACEvolvePPAgent(LearningAgent):
    """PACEvolve++ (Yan et al., 2026)."""

    name: ClassVar[str] = "pacevolve++"
    description: ClassVar[str] = (
        "PACEvolve++: PACEvolve scaffold with a trainable advisor (phase-adaptive Dr.GRPO/SLOO k-1 mix, "
        "DAPO clip, no KL) and a frozen implementer."
    )
    Config: ClassVar[type[BaseModel]] = PACEvolvePPConfig


class ThetaEvolveAgent(LearningAgent):
    """ThetaEvolve's GRPO objective on the shared scaffold."""

    name: ClassVar[str] = "thetaevolve"
    description: ClassVar[str] = "ThetaEvolve preset: GRPO advisor training on the PACEvolve scaffold."
    Config: ClassVar[type[BaseModel]] = ThetaEvolveConfig


class TTTDiscoverAgent(LearningAgent):
    """TTT-Discover's entropic objective, KL shaping and PUCT reuse on the shared scaffold."""

    name: ClassVar[str] = "ttt-discover"
    description: ClassVar[str] = (
        "TTT-Discover preset: adaptive entropic objective, KL shaping, PUCT state reuse (c = 1)."
    )
    Config: ClassVar[type[BaseModel]] = TTTDiscoverConfig


class MaxKAgent(LearningAgent):
    """Max@k (PKPO SLOO k-1) on the shared scaffold."""

    name: ClassVar[str] = "maxk"
    description: ClassVar[str] = "Max@k preset: PKPO SLOO k-1 best-of-k advisor training (k = 4)."
    Config: ClassVar[type[BaseModel]] = MaxKConfig


PRESETS: tuple[type[LearningAgent], ...] = (PACEvolvePPAgent, ThetaEvolveAgent, TTTDiscoverAgent, MaxKAgent)
"""The registered learning agents."""
