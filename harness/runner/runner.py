"""Start, drive and resume runs: one agent on one variant with one seed, recorded to a run directory."""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.envs.registry import Variant
from harness.results.leaderboard import append_leaderboard_row, build_leaderboard_row
from harness.results.provenance import git_state, host_info, package_versions
from harness.results.records import RunInfo, utc_now_iso
from harness.results.store import RunStore
from harness.sandbox.base import Sandbox

from .context import Agent, Budget, BudgetExhausted, ProgressCallback, TaskSpec
from .run_context import RunContext

log = logging.getLogger(__name__)
FLUSH_EVERY_S = 5.0


class ResumeError(RuntimeError):
    """A run cannot be resumed (finished already, or its environment changed)."""


@dataclass(frozen=True)
class RunOutcome:
    """Summary of a finished or interrupted run."""

    run_dir: Path
    """The run directory."""
    info: RunInfo
    """Final header."""
    evaluated: int
    """Evaluations performed in this session."""
    replayed: int
    """Journaled evaluations reused (resume)."""


def task_spec(variant: Variant) -> TaskSpec:
    """The agent-facing view of a variant (loads the family's mutation operators)."""
    mutations: tuple[Any, ...] = ()
    if variant.mutations_ref:
        mutations = tuple(variant.load_attr(variant.mutations_ref)())
    return TaskSpec(
        env_id=variant.id,
        prompt=variant.prompt,
        initial_program=variant.initial_program,
        language=variant.language,
        entry_point=variant.entry_point,
        signature=variant.signature,
        direction=variant.direction,
        combined=variant.combined,
        metrics=variant.metrics,
        progress=variant.progress,
        mutations=mutations,
        subset_unit=getattr(variant, "subset_unit", ""),
    )


def new_run_id(variant: Variant, agent: str, seed: int) -> str:
    """A sortable, unique run id."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{variant.id}-{agent}-s{seed}-{uuid.uuid4().hex[:6]}".replace("+", "p")


def create_run(
    *,
    results_dir: Path,
    variant: Variant,
    agent: Agent,
    seed: int,
    budget: Budget,
    backend: str,
    workers: int,
    command: list[str] | None = None,
) -> RunStore:
    """Create the run directory with a frozen ``run.json`` (config, env, provenance).

    Raises:
        ValueError: If ``variant`` is a validation subset (``<id>~subset-...``): runs and
            leaderboards use full evaluations only.
    """
    if variant.derived_from is not None:
        raise ValueError(
            f"{variant.id} is a validation subset of {variant.base_id}; runs use full variants "
            f"(subset ids are for `bench eval` and agents' validation evaluations)"
        )
    commit, dirty = git_state()
    host = host_info()
    info = RunInfo(
        run_id=new_run_id(variant, agent.name, seed),
        env_id=variant.id,
        family=variant.family,
        variant=variant.id,
        env_version=variant.version,
        env_hash=variant.hash,
        agent=agent.name,
        agent_version=agent.version,
        agent_config=agent.config.model_dump(mode="json"),
        models=agent.models(),
        seed=seed,
        budget=budget.model_dump(mode="json"),
        backend=backend,
        workers=workers,
        package_versions=package_versions(),
        git_commit=commit,
        git_dirty=dirty,
        host=host["host"],
        python=host["python"],
        command=command or list(sys.argv),
    )
    return RunStore.create(results_dir, info)


def drive(
    store: RunStore,
    *,
    variant: Variant,
    agent: Agent,
    backend: Sandbox,
    leaderboard_dir: Path | None,
    on_result: ProgressCallback | None = None,
) -> RunOutcome:
    """Run (or continue) the agent until its budget ends; record everything; append the leaderboard row.

    Ctrl-C marks the run ``interrupted`` (resumable) and re-raises ``KeyboardInterrupt``.

    Raises:
        ResumeError: If the stored run was made on different environment contents.
        KeyboardInterrupt: After recording the interruption.
    """
    info = store.info
    if info.env_hash != variant.hash:
        raise ResumeError(
            f"run {info.run_id} was made on {info.env_id}@{info.env_hash}; the environment "
            f"now hashes to {variant.hash}. Start a new run."
        )
    budget = Budget.model_validate(info.budget)
    last_flush = [time.monotonic()]

    def progress(ev: Any) -> None:
        if on_result is not None:
            on_result(ev)
        if time.monotonic() - last_flush[0] > FLUSH_EVERY_S:
            store.flush_parquet()
            last_flush[0] = time.monotonic()

    ctx = RunContext(
        task=task_spec(variant),
        variant=variant,
        budget=budget,
        seed=info.seed,
        store=store,
        backend=backend,
        on_result=progress,
    )
    store.write_info(info.model_copy(update={"status": "running", "ended_at": None}))
    status = "finished"
    try:
        agent.run(ctx)
    except BudgetExhausted:
        pass
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    except Exception:
        status = "failed"
        raise
    finally:
        rows = store.rows()
        store.flush_parquet()
        best = ctx.best.result.score if ctx.best is not None else None
        try:
            summary = json.loads(json.dumps(agent.run_summary()))
        except Exception as e:  # a summary must never cost the run its record
            summary = {"error": f"run_summary failed: {type(e).__name__}: {e}"}
        final = store.info.model_copy(
            update={
                "status": status,
                "ended_at": utc_now_iso(),
                "best_score": best,
                "n_evaluations": len(rows),
                "agent_summary": summary,
            }
        )
        store.write_info(final)
        if status == "finished" and leaderboard_dir is not None:
            row = build_leaderboard_row(final, rows, variant)
            spent = _ledger_cost(store.run_dir)
            if spent is not None:  # the LLM ledger is the authority on spend (incl. untied calls)
                row = row.model_copy(update={"cost_usd": max(row.cost_usd, spent)})
            append_leaderboard_row(leaderboard_dir, row)
    return RunOutcome(store.run_dir, store.info, ctx.evaluated_now, ctx.replayed)


def _ledger_cost(run_dir: Path) -> float | None:
    """Total LLM spend recorded in the run's ledger, or None for runs without LLM calls."""
    if not (run_dir / "llm_calls.jsonl").exists():
        return None
    from harness.llm.ledger import Ledger

    return Ledger(run_dir).cost_usd


def open_for_resume(run_dir: Path) -> RunStore:
    """Open a run directory for resuming.

    Raises:
        ResumeError: If the run already finished.
        RunStoreError: If the directory is not a run or is locked by a live process.
    """
    store = RunStore.open(run_dir)
    if store.info.status == "finished":
        store.close()
        raise ResumeError(f"run {store.info.run_id} already finished; nothing to resume")
    return store
