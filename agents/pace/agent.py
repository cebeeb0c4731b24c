"""PACE (prompt and control-logic evolution) as a search agent on the PACEvolve scaffold.

The agent A = (P, C) is a frozen model plus its prompt configuration P (:class:`PromptConfig`)
and its control logic C (the scaffold settings of :data:`control.EDITABLE`). No weights change.

* **Fast timescale** (one scaffold step per prompt round): island 0 runs the incumbent P, every
  other island a candidate from one of three channels (a library mutation, a reflective revision
  written by the controller from root causes of the last round's failures, a crossover of the two
  most complementary front members); each candidate joins the Pareto front of progress vs proposer
  tokens with its failure categories; the front's best becomes the incumbent. The round's gain
  ΔÛ_P = Û(A(P_t, C)) − Û(A(P_{t−1}, C)), both measured in the round (island 0 ran P_{t−1}),
  feeds the saturation trigger; saturated -> slow timescale.
* **Slow timescale**: the controller proposes a bounded control edit (:mod:`control`); a scaffold
  step runs under C' with the edit's structural directive in the proposer's requirements; its
  programs pass the safety gates before evaluation. The best program of the step and the
  incumbent program are scored on the same fresh validation subset; the edit is committed iff the
  candidate wins by more than δ, then the candidate is evaluated in full again and the edit is
  rolled back if that is below the incumbent's full score. After a commit (or
  ``max_slow_attempts`` rejections, default 1: Algorithm 1's prompt round before every control
  attempt) the agent returns to the fast timescale.
"""

from __future__ import annotations

import importlib.util
import random
import threading
from typing import Any, ClassVar

from pydantic import BaseModel

from agents.base import AgentContext, Proposal
from agents.pacevolve.agent import PACEvolveAgent
from agents.pacevolve.island import Draft, IslandEngine, Result
from agents.pacevolve.roles import Advisor, Implementer, Summariser
from agents.pacevolve.state import SearchState, derive_seed
from agents.pacevolve.telemetry import IterationRow
from harness.envs.subset import SubsetRequest
from harness.evaluation.result import program_sha256
from harness.llm import LLMCallRow, LLMClient, LLMSettings, RecordJournal
from harness.llm.ledger import Ledger
from harness.scoring.progress import normalized_progress

from . import offline
from .config import PACEConfig
from .control import EDITABLE, safety_violation
from .controller import Controller, Failure
from .credit import gate, round_estimate, saturation, should_roll_back
from .front import Entry
from .prompt_config import Channel, PromptConfig, crossover, mutate, revise
from .prompted_client import PROPOSER_ROLES, PromptedClient
from .state import PACEState, failure_categories
from .telemetry import PACE_STEM, PACERow

offline.register()


class PACEAgent(PACEvolveAgent):
    """PACE: a frozen model evolves its prompt configuration, then its control logic (no RL)."""

    name: ClassVar[str] = "pace"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "PACE: two-timescale prompt (fast) and control-logic (slow) evolution of a frozen model on the "
        "PACEvolve scaffold, saturation trigger, validation gate on a fresh subset, rollback; no weight "
        "updates (local smollm2-135m, any litellm model, or offline/pacevolve, NOT an LLM)."
    )
    Config: ClassVar[type[BaseModel]] = PACEConfig

    def __init__(self, config: BaseModel | None = None, **kwargs: Any) -> None:
        """Bind a configuration (defaults when None); keyword arguments as :class:`PACEvolveAgent`."""
        super().__init__(config, **kwargs)
        self._base = self.cfg.model_copy()
        self.pace = PACEState(control={k: getattr(self._base, k) for k in EDITABLE})
        self._island_prompts: list[PromptConfig] = []
        self._directive = ""
        self._tokens: dict[tuple[int, int], int] = {}
        self._tok_lock = threading.Lock()
        self._ctx: AgentContext | None = None
        self._llm: LLMClient | None = None
        self._journal: RecordJournal[PACERow] | None = None
        self._engine_now: IslandEngine | None = None
        self._step_programs: dict[str, str] = {}

    @property
    def cfg(self) -> PACEConfig:
        """The typed configuration (the base settings with the current control logic applied)."""
        assert isinstance(self.config, PACEConfig)
        return self.config

    # -- wiring -----------------------------------------------------------------------------------
    def preflight(self) -> None:
        """Fail before the run when a local model cannot load or a provider key is missing.

        Raises:
            ValueError: If a ``local/`` model needs packages or files that are missing (the
                message names what to install).
            LLMConfigError: If a litellm model's provider key is missing.
        """
        from agents.learning.local_provider import is_local
        from agents.rl.policy import PolicyLoadError, check_reference

        local = sorted({m for m in self.llm_models().values() if is_local(m)})
        if local:
            needs = ["transformers"] + (
                ["gguf"] if any(m.endswith(("smollm2-135m", ".gguf")) for m in local) else []
            )
            missing = [m for m in needs if importlib.util.find_spec(m) is None]
            if missing:
                names = ", ".join(local)
                raise ValueError(
                    f"local models ({names}) need {' and '.join(missing)}: pip install 'evobench[rl]'"
                )
        for model in local:
            try:
                check_reference(model.split("/", 1)[1])
            except PolicyLoadError as e:
                raise ValueError(str(e)) from None
        super().preflight()

    def _make_client(self, settings: LLMSettings, ledger: Ledger) -> LLMClient:
        from agents.learning.local_provider import is_local, register_local_provider

        if any(is_local(m) for m in self.llm_models().values()):
            register_local_provider()
        client = PromptedClient(self.llm_models(), settings, ledger=ledger, prompt_for=self._prompt_for)
        client.add_listener(self._count_tokens)
        self._llm = client
        return client

    def _prompt_for(self, island: int) -> PromptConfig:
        cfg = self._island_prompts[island] if 0 <= island < len(self._island_prompts) else self.pace.prompt
        if self._directive:
            try:
                return revise(cfg, [f"Structural change to make now: {self._directive}"[:200]])
            except ValueError:  # parse_control_edit cleans directives; never let one break a call
                return cfg
        return cfg

    def _attribute(self, row: LLMCallRow) -> None:
        """Charge controller calls to island 0, so their spend reaches the run's cost records."""
        if row.role == "controller":
            row = row.model_copy(update={"thread": 0})
        super()._attribute(row)

    def _count_tokens(self, row: LLMCallRow) -> None:
        with self._tok_lock:
            key = (row.step, row.thread if row.role in PROPOSER_ROLES else -1)
            self._tokens[key] = self._tokens.get(key, 0) + row.tokens_in + row.tokens_out

    def _snapshot(self, state: SearchState) -> dict[str, Any]:
        return {**super()._snapshot(state), "pace": self.pace.model_dump(mode="json")}

    def _restore_extra(self, data: dict[str, Any]) -> None:
        raw = data.pop("pace", None)
        if raw is not None:
            self.pace = PACEState.model_validate(raw)

    def _engine(
        self,
        ctx: AgentContext,
        state: SearchState,
        advisor: Advisor,
        implementer: Implementer,
        summariser: Summariser,
    ) -> IslandEngine:
        self._ctx = ctx
        self._journal = RecordJournal(ctx.run_dir, PACE_STEM, PACERow, key=lambda r: (r.step, r.event))
        self._apply_control(self.pace.control)
        assert self._engine_now is not None
        return self._engine_now

    def _apply_control(self, control: dict[str, Any]) -> None:
        """Make ``control`` the live control logic: new config, roles and engine."""
        assert self._ctx is not None and self._llm is not None and self._state is not None
        self.config = self._base.model_copy(update=control)
        roles = self._roles(self._ctx, self._llm)
        self._engine_now = super()._engine(self._ctx, self._state, *roles)

    def run_summary(self) -> dict[str, Any]:
        """Counts of the two timescales and the final prompt configuration and control logic."""
        p = self.pace
        return {
            "prompt_rounds": p.rounds,
            "slow_steps": p.slow_steps,
            "saturations": p.saturations,
            "gate_accepted": p.accepted,
            "gate_rejected": p.rejected,
            "rollbacks": p.rollbacks,
            "mode": p.mode,
            "prompt": p.prompt.model_dump(mode="json"),
            "control": p.control,
        }

    # -- helpers ----------------------------------------------------------------------------------
    def _u(self, score: float | None) -> float:
        assert self._ctx is not None
        pr = self._ctx.task.progress
        return normalized_progress(score, pr.y_init, pr.y_target)

    def _u_best(self) -> float:
        assert self._ctx is not None
        best = self._ctx.best
        return self._u(best.result.score if best is not None else None)

    def _incumbent(self, state: SearchState) -> tuple[str, float | None]:
        task = self._ctx.task if self._ctx is not None else None
        scored = [i.best for i in state.islands if i.best.score is not None]
        if not scored or task is None:
            return state.source(state.islands[0].best), state.islands[0].best.score
        sign = 1.0 if task.maximize else -1.0
        ref = max(scored, key=lambda r: sign * (r.score or 0.0))
        return state.source(ref), ref.score

    def _emit(self, step: int, event: str, timescale: str, **fields: Any) -> PACERow:
        row = PACERow(
            step=step,
            event=event,  # type: ignore[arg-type]
            timescale=timescale,  # type: ignore[arg-type]
            evaluations=self._state.evaluations if self._state is not None else 0,
            prompt_json=self.pace.prompt.model_dump_json(),
            control_json=_json(self.pace.control),
            **fields,
        )
        if self._journal is not None:
            self._journal.append(row)  # durable now; the Parquet snapshot is written once per step
        if self._ctx is not None:
            self._ctx.log.info("pace: step %d %s %s %s", step, timescale, event, row.reason or "")
        return row

    def _client_now(self) -> LLMClient:
        assert self._llm is not None
        return self._llm

    def _step_tokens(self, step: int) -> dict[int, int]:
        with self._tok_lock:
            return {k[1]: v for k, v in self._tokens.items() if k[0] == step}

    # -- the two timescales -----------------------------------------------------------------------
    def _step(self, ctx: AgentContext, state: SearchState, engine: IslandEngine) -> list[IterationRow]:
        assert self._engine_now is not None
        try:
            if self.pace.mode == "fast":
                return self._fast_step(ctx, state, self._engine_now)
            return self._slow_step(ctx, state)
        finally:
            if self._journal is not None:
                self._journal.flush()

    def _fast_step(self, ctx: AgentContext, state: SearchState, engine: IslandEngine) -> list[IterationRow]:
        p, cfg = self.pace, self.cfg
        step = state.step + 1
        rng = random.Random(derive_seed(state.base_seed, "pace-fast", step))
        controller = Controller(self._client_now(), ctx.task, cfg, state.base_seed)
        configs, channels = self._candidates(controller, rng, step)
        self._island_prompts = configs
        incumbent = p.prompt
        u0 = self._u_best()
        try:
            rows = super()._step(ctx, state, engine)
        finally:
            self._island_prompts = []
        tokens = self._step_tokens(step)
        island_u: list[float] = []
        p.failures, p.failure_counts = [], {}
        for row, conf, ch in zip(rows, configs, channels, strict=False):
            cats = failure_categories(row, u0, self._u(row.score))
            u_i = self._u(row.score) if row.status == "ok" else 0.0
            island_u.append(u_i)
            for c in cats:
                p.failure_counts[c] = p.failure_counts.get(c, 0) + 1
                if len(p.failures) < cfg.reflect_failures:
                    p.failures.append(
                        Failure(
                            category=c,
                            outcome=row.outcome,
                            status=row.status,
                            error=row.error[:300],
                            hypothesis=row.hypothesis[:300],
                        )  # fmt: skip
                    )
            p.front.add(Entry(config=conf, u=u_i, tokens=tokens.get(row.island, 0), failures=cats, channel=ch,
                              round=p.rounds + 1))  # fmt: skip
        p.rounds += 1
        best = p.front.best()
        if best is not None:
            p.prompt = best.config
        if cfg.saturation_estimate == "round":
            u0, u1 = round_estimate(incumbent, p.prompt, configs, island_u, best.u if best else None)
        else:
            u1 = self._u_best()
        sat = saturation(u0, u1, cfg.epsilon, cfg.saturation_rule)
        common = {"u_before": u0, "u_after": u1, "delta_u": sat.delta_u, "epsilon": cfg.epsilon}
        self._emit(
            step, "prompt_round", "fast", **common, channels=" ".join(channels),
            island_u=" ".join(f"{u:.4f}" for u in island_u),
            island_tokens=" ".join(str(tokens.get(i, 0)) for i in range(len(rows))),
            front_size=len(p.front.entries), tokens=sum(tokens.values()),
        )  # fmt: skip
        reason = (
            f"ΔÛ_P = {sat.delta_u:.4f} {'<=' if cfg.saturation_rule == 'le' else '<'} ε"
            if sat.saturated
            else ""
        )
        self._emit(step, "saturation", "fast", **common, saturated=sat.saturated, reason=reason)
        if sat.saturated:
            p.saturations += 1
            p.mode, p.slow_attempts = "slow", 0
        return rows

    def _candidates(
        self, controller: Controller, rng: random.Random, step: int
    ) -> tuple[list[PromptConfig], list[Channel]]:
        """Island 0: the incumbent; the others cycle through reflective, crossover and mutation."""
        p = self.pace
        configs: list[PromptConfig] = [p.prompt]
        channels: list[Channel] = ["seed"]
        order: list[Channel] = ["reflective", "crossover", "mutation"]
        for i in range(1, self.cfg.islands):
            ch = order[(i - 1 + p.rounds) % len(order)]
            parent_entry = p.front.sample_parent(rng)
            parent = parent_entry.config if parent_entry is not None else p.prompt
            conf: PromptConfig | None = None
            if ch == "reflective" and p.failures:
                conf = controller.reflective(parent, p.failures, step, i)
            elif ch == "crossover" and (pair := p.front.complementary_pair()) is not None:
                conf = crossover(pair[0].config, pair[1].config)
            if conf is None or conf in configs:
                ch, conf = "mutation", mutate(parent, rng)
            configs.append(conf)
            channels.append(ch)
        return configs, channels

    def _evaluate(
        self, ctx: AgentContext, state: SearchState, drafts: list[Draft], step: int
    ) -> tuple[dict[int, Result], dict[int, Proposal]]:
        """On the slow timescale, programs must pass the safety gates before evaluation."""
        if self.pace.mode == "slow":
            for d in drafts:
                if d.program is None:
                    continue
                why = safety_violation(d.program, ctx.task.language.value)
                if why:
                    d.program, d.outcome, d.error = None, "failed:safety", why
                    self._emit(step, "safety", "slow", reason=f"island {d.island}: {why}"[:300])
        return super()._evaluate(ctx, state, drafts, step)

    def _after_step(
        self, ctx: AgentContext, state: SearchState, drafts: list[Draft], results: dict[int, Result]
    ) -> None:
        """Keep the step's program texts (the scaffold drops unreferenced ones right after)."""
        self._step_programs = {program_sha256(d.program): d.program for d in drafts if d.program is not None}

    def _slow_step(self, ctx: AgentContext, state: SearchState) -> list[IterationRow]:
        p = self.pace
        step = state.step + 1
        p.slow_steps += 1
        controller = Controller(self._client_now(), ctx.task, self.cfg, state.base_seed)
        old = dict(p.control)
        edit, err = controller.control_edit(old, p.failure_counts, step)
        if edit is None:
            state.step = step  # a controller-only step: no candidate, counts toward max_empty_steps
            state.empty_steps += 1
            tokens = sum(self._step_tokens(step).values())
            self._emit(step, "control_edit", "slow", accepted=False, reason=err[:300], tokens=tokens)
            self._rejected(step)
            return []
        new = {**old, **edit.set}
        edit_json = edit.model_dump_json()
        self._emit(step, "control_edit", "slow", edit_json=edit_json, reason=f"parsed as {edit.parse}")
        x_old, s_old = self._incumbent(state)
        self._apply_control(new)
        self._directive = edit.directive
        try:
            assert self._engine_now is not None
            rows = super()._step(ctx, state, self._engine_now)
        finally:
            self._directive = ""
        x_new = self._best_of_step(ctx, rows)
        accepted = self._gate(ctx, state, step, x_old, x_new, edit_json)
        if not accepted:
            self._apply_control(old)
            self._rejected(step)
            return rows
        p.control, p.accepted = new, p.accepted + 1
        self._post_commit(ctx, state, step, x_new or "", self._u(s_old), old)
        p.mode = "fast"
        return rows

    def _best_of_step(self, ctx: AgentContext, rows: list[IterationRow]) -> str | None:
        """Text of the best program evaluated (in full) in this step, None when none scored."""
        ok = [r for r in rows if r.status == "ok" and r.score is not None and r.seq >= 0]
        if not ok:
            return None
        sign = 1.0 if ctx.task.maximize else -1.0
        top = max(ok, key=lambda r: sign * (r.score or 0.0))
        return self._step_programs.get(top.program_sha256)

    def _gate(
        self, ctx: AgentContext, state: SearchState, step: int, x_old: str, x_new: str | None, edit_json: str
    ) -> bool:
        """Score incumbent and candidate on one fresh validation subset and apply the gate."""
        cfg = self.cfg
        u_old = u_new = None
        subset = ""
        if x_new is not None and not ctx.out_of_budget():
            req = self._subset_request(state, step)
            subset = f"{req.seed}-{req.size}" if req is not None else "full"
            pair = [
                Proposal(source=x_old, iteration=step, meta={"pace": "gate-incumbent"}),
                Proposal(source=x_new, iteration=step, meta={"pace": "gate-candidate"}),
            ]
            evs = ctx.evaluate(pair, subset=req)
            cut = len(evs) < 2
            if not cut:
                u_old = self._u(evs[0].result.score) if evs[0].ok else None
                u_new = self._u(evs[1].result.score) if evs[1].ok else None
            state.evaluations = max(state.evaluations, *(e.seq + 1 for e in evs), 0)
        tokens = sum(self._step_tokens(step).values())
        decision = gate(u_old, u_new, cfg.delta, tokens=tokens, budget=cfg.token_budget)
        reason = decision.reason
        if subset and u_new is None and not decision.accepted:
            reason = (
                "the budget ended before the gate's evaluations"
                if cut
                else "candidate failed on the validation subset"
            )
        self._emit(
            step, "gate", "slow", subset=subset, u_old=u_old, u_new=u_new, delta=cfg.delta,
            accepted=decision.accepted, reason=reason, edit_json=edit_json, tokens=tokens,
        )  # fmt: skip
        return decision.accepted

    def _post_commit(
        self,
        ctx: AgentContext,
        state: SearchState,
        step: int,
        x_new: str,
        baseline: float,
        old: dict[str, Any],
    ) -> None:
        """Evaluate the committed candidate in full again; roll the edit back if it drops."""
        p = self.pace
        full_u = None
        if not ctx.out_of_budget():
            evs = ctx.evaluate([Proposal(source=x_new, iteration=step, meta={"pace": "post-commit"})])
            if evs:
                full_u = self._u(evs[0].result.score) if evs[0].ok else None
                state.evaluations = max(state.evaluations, evs[0].seq + 1)
        if should_roll_back(baseline, full_u):
            p.control, p.rollbacks = old, p.rollbacks + 1
            self._apply_control(old)
            reason = "full evaluation below the incumbent's full score"
            self._emit(step, "rollback", "slow", u_old=baseline, u_new=full_u, accepted=False, reason=reason)
        else:
            self._emit(
                step,
                "commit",
                "slow",
                u_old=baseline,
                u_new=full_u,
                accepted=True,
                reason="full evaluation holds",
            )

    def _rejected(self, step: int) -> None:
        p = self.pace
        p.rejected += 1
        p.slow_attempts += 1
        if self.cfg.max_slow_attempts and p.slow_attempts >= self.cfg.max_slow_attempts:
            p.mode = "fast"
            self._emit(
                step, "return_fast", "slow", reason=f"{p.slow_attempts} rejected control edits in a row"
            )

    def _subset_request(self, state: SearchState, step: int) -> SubsetRequest | None:
        """A fresh subset (size and composition drawn anew every gate), or None without subsets."""
        assert self._ctx is not None
        if not self._ctx.task.subset_unit:
            return None
        rng = random.Random(derive_seed(state.base_seed, "pace-subset", step))
        lo, hi = self.cfg.subset_fraction
        n = self.cfg.subset_units_hint
        size = max(1, round(n * rng.uniform(lo, hi)))
        return SubsetRequest(seed=rng.getrandbits(31), size=size)


def _json(obj: Any) -> str:
    import json

    return json.dumps(obj, sort_keys=True, default=str)


__all__ = ["PACEAgent"]
