"""Start, drive and resume runs: one agent on one variant with one seed, recorded to a run directory."""

from __future__ import annotations

import json
import logging
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from harness.budget import Budget, BudgetExhausted
from harness.envs.draw_bounds import DrawBounds, bounds_for, key_label
from harness.envs.registry import Variant
from harness.evaluation.result import Status
from harness.results.provenance import git_state, host_info, package_versions
from harness.results.records import RunInfo, RunStatus, utc_now_iso
from harness.results.store import RunStore
from harness.sandbox.base import Sandbox

from .completion import complete, describe_error
from .context import Agent, ProgressCallback, TaskSpec
from .run_context import RunContext

log = logging.getLogger(__name__)
PHASE_BOUNDS = "bounds"
"""Phase: the initial program is being scored on this held-out key's draw (once per key)."""
PHASE_AGENT = "agent"
"""Phase: the bounds are settled and the agent is preparing and submitting its first candidates."""
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
    mode: Literal["warm", "cold"] = "warm",
    leaderboard_dir: Path | None = None,
    run_id: str | None = None,
    label: str | None = None,
) -> RunStore:
    """Create the run directory with a frozen ``run.json`` (config, env, provenance).

    The backend, workers, sandbox mode and leaderboards directory are recorded so that
    ``--resume`` continues the run where it belongs, whatever the resuming shell's defaults.
    ``run_id``: the id chosen beforehand (``bench sweep`` records it before the directory exists,
    so that a sweep killed in between never starts a second run of the cell); None: a new one.
    ``label``: the user's name for the run's identity (``RunInfo.label``).

    Raises:
        ValueError: If ``variant`` is a validation subset (``<id>~subset-...``): runs and
            leaderboards use full evaluations only, or ``run_id`` is not a safe directory name.
        RunStoreError: If the run directory already exists.
    """
    if variant.derived_from is not None:
        raise ValueError(
            f"{variant.id} is a validation subset of {variant.base_id}; runs use full variants "
            f"(subset ids are for `bench eval` and agents' validation evaluations)"
        )
    commit, dirty = git_state()
    host = host_info()
    info = RunInfo(
        run_id=run_id or new_run_id(variant, agent.name, seed),
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
        label=label,
        backend=backend,
        workers=workers,
        mode=mode,
        leaderboard_dir=str(leaderboard_dir.resolve()) if leaderboard_dir is not None else None,
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
    on_phase: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Run (or continue) the agent until its budget ends; record everything; append the leaderboard row.

    Ctrl-C marks the run ``interrupted`` (resumable) and re-raises ``KeyboardInterrupt``. Every
    abort path writes the final status, and the first error is the one raised. A finished run is
    completed in order (``completion.complete``): row queued, appended, then ``finished``.

    Args:
        store: The run (writable).
        variant: Its variant.
        agent: The agent.
        backend: Where candidates are evaluated.
        leaderboard_dir: Where the row goes (recorded in ``run.json``; None: no leaderboard).
        on_result: Called after every evaluation.
        on_phase: Told what the run waits on before its first result: :data:`PHASE_BOUNDS` while
            the initial program is scored on this key's draw (the first run of a key only), then
            :data:`PHASE_AGENT` when the agent starts.

    Raises:
        ResumeError: If the stored run was made on different environment contents.
        KeyboardInterrupt: After recording the interruption.
        LeaderboardPending: If the run finished but its row could only be queued.
    """
    info = store.info
    if info.env_hash != variant.hash:
        raise ResumeError(
            f"run {info.run_id} was made on {info.env_id}@{info.env_hash}; the environment "
            f"now hashes to {variant.hash}. Start a new run."
        )

    def phase(name: str) -> None:
        if on_phase is not None:
            on_phase(name)

    bounds = run_bounds(info, variant, backend, on_measure=lambda: phase(PHASE_BOUNDS))
    phase(PHASE_AGENT)
    if info.progress_bounds != bounds:
        store.write_info(info.model_copy(update={"progress_bounds": bounds}))
        info = store.info
    budget = Budget.model_validate(info.budget)
    last_flush = [time.monotonic()]

    def progress(ev: Any) -> None:
        if on_result is not None:
            on_result(ev)
        if time.monotonic() - last_flush[0] > FLUSH_EVERY_S:
            store.flush_parquet()
            last_flush[0] = time.monotonic()

    ctx = RunContext(
        task=replace(task_spec(variant), progress=bounds.progress()),
        variant=variant,
        budget=budget,
        seed=info.seed,
        store=store,
        backend=backend,
        on_result=progress,
    )
    lb = str(Path(leaderboard_dir).resolve()) if leaderboard_dir is not None else None
    store.write_info(
        info.model_copy(update={"status": "running", "ended_at": None, "error": "", "leaderboard_dir": lb})
    )
    status: RunStatus = "finished"
    first: BaseException | None = None
    try:
        agent.run(ctx)
    except BudgetExhausted:
        pass
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM / SIGHUP turned into it by the CLI
        status, first = "interrupted", e
        raise
    except BaseException as e:
        status, first = "failed", e
        raise
    finally:
        try:
            _close_out(store, ctx, agent, variant, status, first)
        except BaseException as later:
            if first is None:
                raise
            # The first error is what the user must see; what failed while recording it is a note.
            first.add_note(f"(then, recording the {status} status failed: {describe_error(later)})")
            log.warning("recording the %s status failed: %r", status, later)
    return RunOutcome(store.run_dir, store.info, ctx.evaluated_now, ctx.replayed)


def _close_out(
    store: RunStore,
    ctx: RunContext,
    agent: Agent,
    variant: Variant,
    status: RunStatus,
    first: BaseException | None,
) -> None:
    """Write the final status (every path), flushing what it can; a finished run is completed."""
    rows = store.rows()
    flush_error: OSError | None = None
    try:
        store.flush_parquet()
    except OSError as e:  # the journal is the source of truth; the snapshot is rebuilt on resume
        if first is not None:
            log.info("could not write %s: %s", store.parquet_path, describe_error(e))
        elif status == "finished":  # never "finished" with a snapshot short of the journal
            status, first, flush_error = "failed", e, e
    best = ctx.best.result.score if ctx.best is not None else None
    try:
        summary = json.loads(json.dumps(agent.run_summary()))
    except Exception as e:  # a summary must never cost the run its record
        summary = {"error": f"run_summary failed: {type(e).__name__}: {e}"}
    error = ""
    if first is not None and not isinstance(first, KeyboardInterrupt):
        error = describe_error(first)[:1000]
    final = store.info.model_copy(
        update={
            "status": status,
            "ended_at": utc_now_iso(),
            "best_score": best,
            "n_evaluations": len(rows),
            "agent_summary": summary,
            "error": error,
            "leaderboard": "none",
        }
    )
    if status != "finished":
        store.write_info(final, durable_fallback=True)
        if flush_error is not None:
            raise flush_error
        return
    # Not finished until the row is on the leaderboard or queued in the run directory.
    store.write_info(final.model_copy(update={"status": "running"}), durable_fallback=True)
    try:
        complete(store, final, rows, variant)
    except OSError as e:  # the row could not even be queued: failed (resumable), never "running"
        failed = final.model_copy(update={"status": "failed", "error": describe_error(e)[:1000]})
        store.write_info(failed, durable_fallback=True)
        raise


def run_bounds(
    info: RunInfo, variant: Variant, backend: Sandbox, on_measure: Callable[[], object] | None = None
) -> DrawBounds:
    """The progress bounds of a run: those it recorded, else its draw's (measured once per key).

    ``on_measure`` is called just before the initial program is evaluated (only when it is).

    Raises:
        ResumeError: If the run was started on another held-out key than the one in use (its
            later evaluations would score a different draw).
        BoundsError: If the initial program does not score on this key's draw.
    """
    key = key_label(variant)
    if info.progress_bounds is not None:
        if info.progress_bounds.key != key:
            raise ResumeError(
                f"run {info.run_id} was scored on held-out key {info.progress_bounds.key or 'none'}; "
                f"the key in use is {key or 'none'} (`bench key show`). Resume it with that key."
            )
        return info.progress_bounds

    def score_initial() -> float | None:
        log.info("%s: scoring the initial program once on held-out key %s", variant.id, key)
        if on_measure is not None:
            on_measure()
        result = backend.evaluate(variant, variant.initial_program)
        return result.score if result.status is Status.OK else None

    return bounds_for(variant, score_initial)


def open_for_resume(run_dir: Path) -> RunStore:
    """Open a run directory for resuming (a finished one too: its leaderboard row may be missing).

    Raises:
        RunStoreError: If the directory is not a run or is locked by a live process.
    """
    return RunStore.open(run_dir)
