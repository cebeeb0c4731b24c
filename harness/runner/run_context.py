"""The runner's implementation of ``AgentContext``: budget, journal-backed evaluate, replay on resume."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from harness.budget import Budget, BudgetExhausted
from harness.envs.registry import Variant
from harness.envs.subset import SubsetRequest, is_reduced_id
from harness.evaluation.result import EvalResult, Status
from harness.results.records import CandidateRow, utc_now_iso
from harness.results.store import RunStore
from harness.sandbox.base import Sandbox

from .context import AgentContext, Evaluated, ProgressCallback, Proposal, TaskSpec

log = logging.getLogger(__name__)
CHECKPOINT = "agent"


def result_from_row(row: CandidateRow, variant: Variant) -> EvalResult:
    """Rebuild the ``EvalResult`` of a journaled evaluation (used when replaying a resumed run)."""
    return EvalResult(
        status=row.status,
        score=row.score,
        metrics=row.metrics,
        reason=row.reason,
        env_id=row.env_id,
        env_version=variant.version,
        env_hash=row.env_hash,
        program_sha256=row.program_sha256,
        backend=row.backend,
        attempts=row.attempts,
    )


class RunContext(AgentContext):
    """Journal-backed context: every evaluation is appended durably before the agent sees it.

    On resume the journal's rows are replayed: a proposal whose ``seq`` and program match a
    journaled row gets the recorded result without being evaluated again.
    """

    def __init__(
        self,
        *,
        task: TaskSpec,
        variant: Variant,
        budget: Budget,
        seed: int,
        store: RunStore,
        backend: Sandbox,
        on_result: ProgressCallback | None = None,
        resolve_env: Callable[[str], Variant] | None = None,
    ) -> None:
        """Wire the context to a run store and a sandbox backend.

        ``resolve_env`` resolves derived (validation-subset) variant ids; default: the installed
        environments' registry.
        """
        self.task, self.variant, self.budget, self.seed = task, variant, budget, seed
        self._resolve_env = resolve_env
        self.rng = random.Random(seed)
        self.log = logging.getLogger(f"agent.{store.info.agent}")
        self.store, self.backend, self.on_result = store, backend, on_result
        self.workers = int(getattr(backend, "workers", 1))
        self.run_dir = store.run_dir
        self._journal = {r.seq: r for r in store.rows()}
        self._next_seq = 0
        self._best: Evaluated | None = None
        self._cost = sum(r.cost_usd for r in self._journal.values())
        self._t0 = time.monotonic()
        self._lock = threading.Lock()
        self.evaluated_now = 0
        self.replayed = 0

    # -- budget ---------------------------------------------------------------------------------
    @property
    def remaining_evaluations(self) -> int:
        """Evaluations left."""
        return max(0, self.budget.max_evaluations - self._next_seq)

    def out_of_budget(self) -> bool:
        """Whether evaluations, wall time or cost are used up."""
        if self.remaining_evaluations <= 0:
            return True
        if self.budget.max_wall_s is not None and time.monotonic() - self._t0 >= self.budget.max_wall_s:
            return True
        return self.budget.max_cost_usd is not None and self._cost >= self.budget.max_cost_usd

    def add_llm_usage(self, tokens_in: int, tokens_out: int, cost_usd: float) -> None:
        """Count LLM spend toward the cost budget."""
        self._cost += cost_usd

    # -- evaluation -----------------------------------------------------------------------------
    def _variant_for(self, subset: SubsetRequest | None) -> Variant:
        if subset is None:
            return self.variant
        if not self.task.subset_unit:
            raise ValueError(
                f"{self.variant.id} cannot score validation subsets (its family declares no subset_unit)"
            )
        resolve = self._resolve_env
        if resolve is None:
            from harness.envs.registry import default_registry

            resolve = default_registry().get
        return resolve(self.variant.id + subset.to_id_suffix())

    def evaluate(
        self, proposals: Sequence[Proposal], *, subset: SubsetRequest | None = None
    ) -> list[Evaluated]:
        """Evaluate a batch (cut to the budget); replays journaled results on resume.

        With ``subset`` the batch is scored on that seeded subset of the variant's units (the
        derived variant ``<id>~subset-<seed>-<size>``); those rows count toward the budget but
        never become the run's best.

        Raises:
            BudgetExhausted: If nothing is left of the budget.
            ValueError: If ``subset`` is given and the variant cannot score subsets.
        """
        variant = self._variant_for(subset)
        if self.out_of_budget():
            raise BudgetExhausted("budget exhausted")
        batch = list(proposals)[: self.remaining_evaluations]
        seqs = list(range(self._next_seq, self._next_seq + len(batch)))
        self._next_seq += len(batch)
        out: dict[int, Evaluated] = {}
        fresh: list[tuple[int, Proposal]] = []
        for seq, p in zip(seqs, batch, strict=True):
            row = self._journal.get(seq)
            if row is not None and row.program_sha256 == _sha(p.source) and row.env_id == variant.id:
                out[seq] = Evaluated(seq, p, result_from_row(row, self.variant), replayed=True)
                self.replayed += 1
                self._note(out[seq])
            else:
                if row is not None:
                    log.warning("resume diverged at seq %d (different program); evaluating anew", seq)
                fresh.append((seq, p))
        if fresh:
            started = utc_now_iso()
            futures = {self.backend.submit(variant, p.source): (seq, p) for seq, p in fresh}
            from concurrent.futures import as_completed

            for fut in as_completed(futures):
                seq, p = futures[fut]
                res = fut.result()
                self._record(seq, p, res, started)
                out[seq] = Evaluated(seq, p, res)
                self._note(out[seq])
        return [out[s] for s in seqs]

    def _record(self, seq: int, p: Proposal, res: EvalResult, started: str) -> None:
        ext = "cpp" if self.task.language.value == "cpp" else "py"
        self.store.put_program(p.source, ext=ext)
        row = CandidateRow.from_result(
            res,
            run_id=self.store.info.run_id,
            seq=seq,
            iteration=p.iteration,
            thread=p.thread,
            parent_id=p.parent_id,
            started_at=started,
            finished_at=utc_now_iso(),
            tokens_in=p.tokens_in,
            tokens_out=p.tokens_out,
            cost_usd=p.cost_usd,
        )
        self.store.append(row)
        self._journal[seq] = row
        self._cost += p.cost_usd
        self.evaluated_now += 1

    def _note(self, ev: Evaluated) -> None:
        r = ev.result
        if (
            not is_reduced_id(r.env_id)
            and r.status is Status.OK
            and r.score is not None
            and (self._best is None or self.task.better(r.score, self._best.result.score or 0.0))
        ):
            self._best = ev
        if self.on_result is not None:
            self.on_result(ev)

    @property
    def best(self) -> Evaluated | None:
        """Best ok evaluation so far."""
        return self._best

    @property
    def n_done(self) -> int:
        """Evaluations handed out so far (replayed or fresh)."""
        return self._next_seq

    # -- checkpoints ----------------------------------------------------------------------------
    def save_checkpoint(self, state: dict[str, Any]) -> None:
        """Persist agent state atomically, tagged with the current sequence number."""
        self.store.save_checkpoint(CHECKPOINT, {"seq": self._next_seq, "state": state})

    def load_checkpoint(self) -> dict[str, Any] | None:
        """The last saved state, with ``_seq`` telling where it was taken (None if none)."""
        data = self.store.load_checkpoint(CHECKPOINT)
        if not isinstance(data, dict):
            return None
        state = dict(data.get("state") or {})
        state["_seq"] = int(data.get("seq", 0))
        return state

    def skip_to(self, seq: int) -> None:
        """Continue numbering at ``seq`` (an agent restored from a checkpoint taken there)."""
        self._next_seq = max(self._next_seq, seq)
        for s in range(seq):
            row = self._journal.get(s)
            if (
                row is not None
                and row.status is Status.OK
                and row.score is not None
                and not is_reduced_id(row.env_id)
            ):
                ev = Evaluated(s, Proposal(source=""), result_from_row(row, self.variant), replayed=True)
                if self._best is None or self.task.better(row.score, self._best.result.score or 0.0):
                    self._best = ev


def _sha(source: str) -> str:
    from harness.evaluation.result import program_sha256

    return program_sha256(source)
