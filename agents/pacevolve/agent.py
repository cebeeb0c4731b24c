"""The PACEvolve agent: step-synchronous islands with HCM, MBB and CE on role-based LLM calls.

One step: every island drafts one candidate (in parallel threads: advisor stages, then the
implementer), the step's candidates are evaluated as one batch through ``ctx.evaluate``, every
island absorbs its result (records, caps, snapshot), then momentum and interventions run in
island order, the step's telemetry rows are written, observers are notified (the
synchronisation point a trained advisor's updates would use) and the state is checkpointed.
``bench run --resume`` restores the last checkpoint and continues numbering evaluations where
it was taken; the interrupted step is redone (the run's response cache returns the answers it
already paid for, so with the same prompts the same candidates come back and are replayed).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from agents.base import Agent, AgentContext, Proposal
from harness.evaluation.result import program_sha256
from harness.llm import LLMCallRow, LLMClient, LLMSettings, RecordJournal, install_log_redaction, is_offline
from harness.llm.ledger import Ledger
from harness.llm.offline import register_operators

from . import offline, offline_exact
from .config import PACEvolveConfig
from .interventions import MomentumOutcome, island_progress, update_and_intervene
from .island import AbsorbInfo, Draft, IslandEngine, Result
from .llm_roles import LLMAdvisor, LLMImplementer, LLMSummariser
from .momentum import Momentum
from .roles import Advisor, Implementer, Summariser
from .state import IslandState, SearchState
from .telemetry import EVENTS_STEM, ITERATIONS_STEM, EventRow, IterationRow, StepObserver, events_of
from .threads import run_on_threads

FLUSH_EVERY_S = 10.0
"""Minimum seconds between Parquet snapshots of the ledger and the telemetry during a run."""
CACHE_DIRNAME = "llm_cache"
"""Response cache directory inside the run directory (``cache = "run"``)."""

offline.register()
offline_exact.register()


class PACEvolveAgent(Agent):
    """PACEvolve (Yan et al., 2026) with separate advisor, implementer and summariser roles."""

    name: ClassVar[str] = "pacevolve"
    version: ClassVar[str] = "1.0.0"
    description: ClassVar[str] = (
        "PACEvolve: idea pool with pruning (HCM), momentum backtracking (MBB), adaptive island crossover "
        "(CE); any litellm model, or offline/pacevolve (deterministic proposer, NOT an LLM)."
    )
    uses_llm: ClassVar[bool] = True
    Config: ClassVar[type[BaseModel]] = PACEvolveConfig

    def __init__(
        self,
        config: BaseModel | None = None,
        *,
        advisor: Advisor | None = None,
        implementer: Implementer | None = None,
        summariser: Summariser | None = None,
        observers: Sequence[StepObserver] = (),
    ) -> None:
        """Bind a configuration; roles left None are LLM-backed with the configured models.

        Args:
            config: A :class:`PACEvolveConfig` (defaults when None).
            advisor: Replacement advisor (e.g. a trained policy).
            implementer: Replacement implementer.
            summariser: Replacement summariser.
            observers: Called after every step with its telemetry rows.
        """
        super().__init__(config)
        self._advisor, self._implementer, self._summariser = advisor, implementer, summariser
        self.observers = list(observers)
        self._usage_lock = threading.Lock()
        self._state: SearchState | None = None

    @property
    def cfg(self) -> PACEvolveConfig:
        """The typed configuration."""
        assert isinstance(self.config, PACEvolveConfig)
        return self.config

    def models(self) -> dict[str, str]:
        """Role -> litellm model string (``offline/...`` is the offline proposer, not an LLM)."""
        return self.cfg.role_models()

    def llm_models(self) -> dict[str, str]:
        """Role -> litellm model string of the roles served through litellm (all of them here)."""
        return self.models()

    # -- wiring -----------------------------------------------------------------------------------
    def _client(self, ctx: AgentContext) -> LLMClient:
        cfg = self.cfg
        caps = [c for c in (cfg.max_cost_usd, ctx.budget.max_cost_usd) if c is not None]
        cache_dir: Path | None = None
        if cfg.cache == "run":
            cache_dir = ctx.run_dir / CACHE_DIRNAME if ctx.run_dir is not None else None
        elif cfg.cache not in ("off", ""):
            cache_dir = Path(cfg.cache).expanduser()
        settings = LLMSettings(
            timeout_s=cfg.timeout_s,
            max_retries=cfg.max_retries,
            backoff_s=cfg.retry_backoff_s,
            temperature=cfg.temperature,
            max_tokens=cfg.max_tokens,
            params=dict(cfg.litellm_params),
            cache_dir=cache_dir,
            max_cost_usd=min(caps) if caps else None,
        )
        client = self._make_client(settings, Ledger(ctx.run_dir))
        client.add_listener(self._attribute)
        return client

    def _make_client(self, settings: LLMSettings, ledger: Ledger) -> LLMClient:
        """The LLM client of the run (subclasses may wrap the calls)."""
        return LLMClient(self.llm_models(), settings, ledger=ledger)

    def _attribute(self, row: LLMCallRow) -> None:
        """Charge a call to its island until that island's next evaluated candidate carries it."""
        state = self._state
        if state is None or not 0 <= row.thread < len(state.islands):
            return
        with self._usage_lock:
            isl = state.islands[row.thread]
            isl.pending_tokens_in += row.tokens_in
            isl.pending_tokens_out += row.tokens_out
            isl.pending_cost_usd += row.cost_usd

    def _roles(self, ctx: AgentContext, client: LLMClient) -> tuple[Advisor, Implementer, Summariser]:
        """The three roles: the injected ones, else LLM-backed on ``client``."""
        cfg = self.cfg
        advisor = self._advisor or LLMAdvisor(
            client, max_attempts=cfg.max_attempts, novelty_hint_pool_size=cfg.novelty_hint_pool_size
        )
        implementer = self._implementer or LLMImplementer(client, max_fix_attempts=cfg.max_fix_attempts)
        summariser = self._summariser or LLMSummariser(client, max_attempts=cfg.max_attempts)
        return advisor, implementer, summariser

    def _snapshot(self, state: SearchState) -> dict[str, Any]:
        """The checkpoint payload (subclasses add their own keys beside the search state)."""
        return state.model_dump(mode="json")

    def _restore_extra(self, data: dict[str, Any]) -> None:  # noqa: B027 - optional hook
        """Take back the keys :meth:`_snapshot` added (called before the search state is read)."""

    def _start(self, ctx: AgentContext) -> SearchState:
        cfg = self.cfg
        first = ctx.evaluate([Proposal(source=ctx.task.initial_program, iteration=0)])
        score = first[0].result.score if first and first[0].ok else None
        state = SearchState(base_seed=ctx.rng.getrandbits(31), islands=[], evaluations=len(first))
        ref = state.add_program(ctx.task.initial_program, score)
        state.known[ref.sha] = score
        # s_0 of every island: the measured score of the initial program (when it failed, each
        # island's first scored program sets it; see interventions.update_and_intervene)
        state.islands = [
            IslandState(index=i, sota=ref, best=ref, s0=score, momentum=Momentum(value=cfg.momentum_init))
            for i in range(cfg.islands)
        ]
        ctx.save_checkpoint(self._snapshot(state))
        return state

    def _restore(self, ctx: AgentContext) -> SearchState | None:
        data = ctx.load_checkpoint()
        if not data:
            return None
        seq = int(data.pop("_seq", 0))
        self._restore_extra(data)
        state = SearchState.model_validate(data)
        ctx.skip_to(seq)
        ctx.log.info("pacevolve: resumed at step %d (evaluation %d)", state.step, seq)
        return state

    def preflight(self) -> None:
        """Fail before a run starts when an LLM-backed role's provider key is missing.

        Raises:
            LLMConfigError: Naming the model and the environment variables it needs.
        """
        if None in (self._advisor, self._implementer, self._summariser):
            settings = LLMSettings(params=dict(self.cfg.litellm_params))
            LLMClient(self.llm_models(), settings).check_environment()

    def _engine(
        self,
        ctx: AgentContext,
        state: SearchState,
        advisor: Advisor,
        implementer: Implementer,
        summariser: Summariser,
    ) -> IslandEngine:
        """The per-island engine (subclasses may choose parents differently)."""
        return IslandEngine(ctx.task, self.cfg, state, advisor, implementer, summariser, ctx.log)

    # -- the loop ---------------------------------------------------------------------------------
    def run(self, ctx: AgentContext) -> None:
        """Search until the budget (evaluations, time or LLM cost) ends.

        Raises:
            BudgetExhausted: When the evaluation, time or cost budget runs out (the runner's clean stop).
            LLMConfigError: If an LLM-backed role's provider key is missing from the environment.
        """
        cfg = self.cfg
        install_log_redaction([ctx.log.name, __name__])
        register_operators(ctx.task.env_id, list(ctx.task.mutations))
        client = self._client(ctx)
        if None in (self._advisor, self._implementer, self._summariser):
            client.check_environment()
        for role, model in self.llm_models().items():
            if is_offline(model):
                ctx.log.info("pacevolve: role %s uses %s, the offline proposer (NOT an LLM)", role, model)
        advisor, implementer, summariser = self._roles(ctx, client)
        telemetry: RecordJournal[IterationRow] = RecordJournal(
            ctx.run_dir, ITERATIONS_STEM, IterationRow, key=lambda r: (r.step, r.island)
        )
        events: RecordJournal[EventRow] = RecordJournal(
            ctx.run_dir, EVENTS_STEM, EventRow, key=lambda r: (r.step, r.island, r.kind)
        )
        state = self._restore(ctx) or self._start(ctx)
        self._state = state
        engine = self._engine(ctx, state, advisor, implementer, summariser)
        last_flush = time.monotonic()
        try:
            while not ctx.out_of_budget():
                rows = self._step(ctx, state, engine)
                for row in rows:
                    telemetry.append(row)
                    for ev in events_of(row):
                        events.append(ev)
                        if ev.kind in ("backtrack", "crossover"):
                            ctx.log.info(
                                "pacevolve: island %d %s at evaluation %d (%s)",
                                ev.island,
                                ev.kind,
                                ev.evaluations,
                                ev.detail,
                            )
                ctx.save_checkpoint(self._snapshot(state))
                for obs in self.observers:
                    obs.on_step(state.step, rows)
                if state.empty_steps >= cfg.max_empty_steps:
                    ctx.log.warning(
                        "pacevolve: no candidate in %d consecutive steps; stopping", state.empty_steps
                    )
                    break
                if time.monotonic() - last_flush > FLUSH_EVERY_S:
                    client.ledger.flush()
                    telemetry.flush()
                    events.flush()
                    last_flush = time.monotonic()
        finally:
            with self._usage_lock:
                for isl in state.islands:
                    ctx.add_llm_usage(isl.pending_tokens_in, isl.pending_tokens_out, isl.pending_cost_usd)
            client.ledger.flush()
            telemetry.flush()
            events.flush()

    def _parallel(self, fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
        """``[fn(x) for x in items]`` on up to ``llm_concurrency`` daemon threads.

        Daemon threads let Ctrl-C end the run at once instead of waiting for slow LLM calls.
        The first exception (by item order) is re-raised after all threads finished.
        """
        workers = self.cfg.llm_concurrency or len(items)
        if workers <= 1 or len(items) <= 1:
            return [fn(x) for x in items]
        return run_on_threads(fn, items, name="pacevolve", workers=workers)

    def _step(self, ctx: AgentContext, state: SearchState, engine: IslandEngine) -> list[IterationRow]:
        state.step += 1
        step = state.step
        drafts = self._draft_all(engine, state, step)
        results, proposals = self._evaluate(ctx, state, drafts, step)
        infos: list[AbsorbInfo] = self._parallel(
            lambda isl: engine.absorb(isl, drafts[isl.index], step, results.get(isl.index)), state.islands
        )
        rows = []
        for isl, d, info in zip(state.islands, drafts, infos, strict=True):
            r = results.get(isl.index)
            mo = update_and_intervene(
                state, isl, self.cfg, ctx.task, step, r is not None and r.ok, r is not None and r.evaluated
            )
            rows.append(self._row(ctx, isl, d, r, info, mo, proposals.get(isl.index), step))
        self._after_step(ctx, state, drafts, results)
        state.empty_steps = 0 if proposals else state.empty_steps + 1
        state.compact()
        return rows

    def _draft_all(self, engine: IslandEngine, state: SearchState, step: int) -> list[Draft]:
        """Every island's draft of this step (on up to ``llm_concurrency`` threads).

        A hook: the learning agents batch their policy calls across the islands here.
        """
        return self._parallel(lambda isl: engine.draft(isl, step), state.islands)

    def _after_step(  # noqa: B027 - optional hook
        self, ctx: AgentContext, state: SearchState, drafts: list[Draft], results: dict[int, Result]
    ) -> None:
        """Hook after the step's results are absorbed, before unreferenced programs are dropped.

        The synchronisation point where a trained advisor is updated.
        """

    def _evaluate(
        self, ctx: AgentContext, state: SearchState, drafts: list[Draft], step: int
    ) -> tuple[dict[int, Result], dict[int, Proposal]]:
        """Evaluate the step's new programs as one batch; answer duplicates from earlier results."""
        batch: list[tuple[Draft, Proposal]] = []
        seen: set[str] = set()
        for d in drafts:
            if d.program is None:
                continue
            sha = program_sha256(d.program)
            if sha in state.known or sha in seen:
                d.outcome = "duplicate"
                continue
            seen.add(sha)
            isl = state.islands[d.island]
            with self._usage_lock:
                tokens_in, tokens_out, cost = (
                    isl.pending_tokens_in,
                    isl.pending_tokens_out,
                    isl.pending_cost_usd,
                )
            proposal = Proposal(
                source=d.program,
                parent_id=d.parent.sha,
                thread=d.island,
                iteration=step,
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                cost_usd=cost,
                meta={
                    "parent_source": d.parent_source,
                    "idea_id": d.selection.idea_id if d.selection else -1,
                },
            )
            batch.append((d, proposal))
        evaluated = ctx.evaluate([p for _, p in batch]) if batch else []
        results: dict[int, Result] = {}
        proposals: dict[int, Proposal] = {}
        for (d, p), ev in zip(batch, evaluated, strict=False):
            r = ev.result
            score = r.score if ev.ok else None
            ref = state.add_program(p.source, score) if ev.ok else state.add_program(p.source, None)
            state.known[ref.sha] = score
            results[d.island] = Result(r.status.value, score, ref, r.reason[:300], True, ev.seq)
            state.evaluations = max(state.evaluations, ev.seq + 1)
            proposals[d.island] = p
            isl = state.islands[d.island]
            with self._usage_lock:
                isl.pending_tokens_in -= p.tokens_in
                isl.pending_tokens_out -= p.tokens_out
                isl.pending_cost_usd = max(0.0, isl.pending_cost_usd - p.cost_usd)
        for d, _ in batch[len(evaluated) :]:
            d.outcome = "budget"
        for d in drafts:
            if d.outcome == "duplicate" and d.program is not None:
                sha = program_sha256(d.program)
                if sha not in state.known:  # its twin in this batch was cut by the budget
                    d.outcome = "budget"
                    continue
                known = state.known[sha]
                ref = state.add_program(d.program, known)
                results[d.island] = Result(
                    "ok" if known is not None else "failed", known, ref, evaluated=False
                )
        return results, proposals

    def _row(
        self,
        ctx: AgentContext,
        isl: IslandState,
        d: Draft,
        r: Result | None,
        info: AbsorbInfo,
        mo: MomentumOutcome,
        p: Proposal | None,
        step: int,
    ) -> IterationRow:
        return IterationRow(
            step=step,
            island=isl.index,
            evaluations=self._state.evaluations if self._state is not None else 0,
            parent_sha256=d.parent.sha,
            parent_source=d.parent_source,
            restored_step=d.restored_step,
            outcome=d.outcome or ("evaluated" if r is not None else "none"),
            error=d.error[:500],
            idea_id=d.selection.idea_id if d.selection else -1,
            hypothesis=d.selection.hypothesis[:500] if d.selection else "",
            idea_events=" ".join(d.idea_events),
            seq=r.seq if r is not None else -1,
            program_sha256=program_sha256(d.program) if d.program is not None else "",
            status=r.status if r is not None else "",
            score=r.score if r is not None else None,
            island_best=isl.best.score,
            sota_score=isl.sota.score,
            relative_progress=mo.relative_progress,
            momentum=isl.momentum.value,
            absolute_progress=island_progress(isl, ctx.task),
            s0=isl.s0,
            triggered=mo.triggered,
            action=mo.action,
            w_backtrack=mo.w_backtrack,
            w_crossover_json=mo.w_crossover_json,
            pool_size=len(isl.ideas),
            pruned_ids=" ".join(str(i) for i in info.pruned),
            summarized_idea=info.summarized_idea,
            evicted_ids=" ".join(str(i) for i in info.evicted),
            backtrack_ended=info.backtrack_ended,
            tokens_in=p.tokens_in if p else 0,
            tokens_out=p.tokens_out if p else 0,
            cost_usd=p.cost_usd if p else 0.0,
        )
