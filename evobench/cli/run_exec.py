"""``bench eval`` and ``bench run`` carried out: the backend, the run store, the progress display.

Imported only by those commands (:mod:`evobench.cli.commands_run` holds their options and help),
so that the other commands start without pandas, pyarrow or the sandbox.
"""

from __future__ import annotations

import os
import sys
from collections import Counter
from pathlib import Path

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from harness.envs.draw_bounds import BoundsError
from harness.envs.refcheck import EnvironmentImportError
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import Status
from harness.results.store import RunStore, RunStoreError
from harness.runner.completion import LeaderboardPending
from harness.runner.context import Evaluated
from harness.runner.runner import PHASE_AGENT, PHASE_BOUNDS, ResumeError, create_run, drive, open_for_resume
from harness.sandbox.base import Sandbox
from harness.sandbox.factory import BackendUnavailable, make_backend
from harness.sandbox.names import BackendName, Mode

from .console import console, err_console, fmt
from .failures import SignalInterrupt, stop_signals_interrupt, unwritable, user_error
from .run_plan import ReaddPlan, RunPlan, data_problem
from .run_warmup import stop

EXIT_CANDIDATE, EXIT_USAGE, EXIT_INFRA, EXIT_INTERRUPTED = 1, 2, 3, 130


def failed_text(failed: Counter[str]) -> str:
    """``failed N (error a, timeout b, ...)``: evaluations that did not score, by status."""
    n = sum(failed.values())
    detail = ", ".join(f"{k} {c}" for k, c in sorted(failed.items()))
    return f"failed {n}" + (f" ({detail})" if n else "")


def key_note(v: Variant) -> str:
    """``; held-out key ab12cd`` (or ``; public draw``) for a variant scored on a secret draw, else ``""``.

    Its scores compare only with scores made under the same key (``bench key``).
    """
    if v.scorer_params.get("heldout") != "secret":
        return ""
    from harness.envs.secret import HeldoutKeyError, fingerprint

    try:
        fp = fingerprint()
    except HeldoutKeyError:
        return ""  # the evaluation itself reports an unusable key
    return "; public draw" if fp == "public" else f"; held-out key {fp}"


def _check_data(v: Variant) -> bool:
    problem = data_problem(v)
    if problem:
        err_console.print(f"bench: error: {problem}")
    return problem is None


def evaluate_file(program: Path, env: str, backend: BackendName, mode: Mode, json_out: bool) -> int:
    """``bench eval``: score one program file on one variant (the options: ``commands_run.eval_program``).

    Returns:
        0 ok, 1 candidate failure, 2 usage, 3 infra error.
    """
    v = default_registry().get(env)
    if not program.is_file():
        err_console.print(f"bench: error: no such file: {program}")
        return EXIT_USAGE
    if not _check_data(v):
        return EXIT_USAGE
    try:
        source = program.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        err_console.print(f"bench: error: {program} is not UTF-8 text (byte {e.start}); give a source file")
        return EXIT_USAGE
    try:
        with make_backend(backend, workers=1, mode=mode) as b:
            r = b.evaluate(v, source)
    except BackendUnavailable as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    if json_out:
        print(r.model_dump_json(indent=2))
    else:
        t = Table(title=f"{program} on {v.id}@{v.hash}", show_header=False)
        t.add_row("status", r.status.value)
        t.add_row("score", fmt(r.score, 6) + key_note(v).replace(";", ","))
        for k, x in sorted(r.metrics.items()):
            t.add_row(f"  {k}", fmt(x, 6))
        if r.reason:
            t.add_row("reason", r.reason[-1500:])
        if r.cases:
            by_status = Counter(c.status for c in r.cases)
            t.add_row("cases", ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())))
            for c in [c for c in r.cases if c.reason][:10]:
                cpu = "" if c.cpu_seconds is None else f", {c.cpu_seconds:.3f} s CPU"
                t.add_row(f"  {c.name}", f"{c.status}{cpu}: {c.reason}"[:300])
        d = r.durations
        t.add_row(
            "durations",
            f"setup {d.setup:.3f}s, candidate {d.candidate:.3f}s, score {d.score:.3f}s, total {d.total:.3f}s",
        )
        t.add_row("program sha256", r.program_sha256)
        console.print(t)
    if r.status is Status.OK:
        return 0
    return EXIT_INFRA if r.status is Status.INFRA_ERROR else EXIT_CANDIDATE


def create_store(plan: RunPlan, *, command: list[str] | None = None, run_id: str | None = None) -> RunStore:
    """Create the run directory of a new run's plan (locked, writable).

    Args:
        plan: A new run's plan (``resume`` None).
        command: The command recorded in ``run.json`` (default: this process's ``bench`` command).
        run_id: The run's id chosen beforehand (default: a new one).

    Raises:
        OSError: If the directory cannot be made.
        RunStoreError: If a directory of that run id exists already.
    """
    return create_run(
        results_dir=plan.results_dir,
        variant=plan.variant,
        agent=plan.agent,
        seed=plan.seed,
        budget=plan.budget,
        backend=plan.backend,
        workers=plan.workers,
        command=command or ["bench", *sys.argv[1:]],
        mode=plan.mode,
        leaderboard_dir=plan.leaderboard_dir,
        run_id=run_id,
        label=plan.label,
    )


def _open_store(plan: RunPlan | ReaddPlan) -> RunStore | int:
    """The run's store (created, or locked for resuming), or the exit code of why it cannot be."""
    resume = plan.run_dir if isinstance(plan, ReaddPlan) else plan.resume
    if resume is not None:
        try:
            return open_for_resume(resume)
        except (RunStoreError, OSError) as e:
            err_console.print(f"bench: error: {user_error(e)}")
            return EXIT_USAGE
    assert isinstance(plan, RunPlan)
    try:
        return create_store(plan)
    except OSError as e:
        err_console.print(f"bench: error: {user_error(e)}")
        return EXIT_INFRA


def execute(plan: RunPlan | ReaddPlan, *, no_progress: bool = False, backend: Sandbox | None = None) -> int:
    """Carry out a plan: create (or lock) the run, start the backend, drive the agent, report.

    ``backend``: workers already started for this plan (:mod:`evobench.cli.run_warmup`); the run
    uses them instead of starting its own, and they are stopped whatever happens.

    A finished run (:class:`~evobench.cli.run_plan.ReaddPlan`, or one that finished since it was
    planned) only gets its leaderboard row re-added if it is missing.

    Output directories that cannot be written are refused first (exit 2), before the run's
    directory is made.

    Returns:
        ``bench run``'s exit code: 0 done, 2 usage, 3 infra error, 130 interrupted.
    """
    try:
        return _execute(plan, no_progress, backend)
    finally:
        if backend is not None:  # unused (refused output directory, finished run): not waited for
            stop(backend)


def precheck(plan: RunPlan | ReaddPlan) -> tuple[str, int] | None:
    """What stops a plan before its run directory exists: (message, exit code); None if nothing.

    The variant family's own code must import, and the output directories must be writable.
    """
    if plan.variant.mutations_ref:  # the family's own code, checked before a run directory exists
        try:
            plan.variant.load_attr(plan.variant.mutations_ref)
        except EnvironmentImportError as e:
            return str(e), EXIT_INFRA
    if isinstance(plan, RunPlan):  # before a run directory exists or anything is evaluated
        new = plan.resume is None
        out_dirs = [(plan.results_dir, "--results-dir")] if new else []
        lb_flag = "--leaderboard-dir" if new else "the run's leaderboard directory"
        for directory, flag in [*out_dirs, (plan.leaderboard_dir, lb_flag)]:
            problem = unwritable(directory, flag)
            if problem:
                return problem, EXIT_USAGE
    return None


def _execute(plan: RunPlan | ReaddPlan, no_progress: bool, started: Sandbox | None) -> int:
    stopped = precheck(plan)
    if stopped is not None:
        err_console.print(f"bench: error: {stopped[0]}")
        return stopped[1]
    opened = _open_store(plan)
    if isinstance(opened, int):
        return opened
    store = opened
    if isinstance(plan, ReaddPlan) or store.info.status == "finished":
        return readd_finished(store, plan.variant)
    v, ag, workers, leaderboard_dir = plan.variant, plan.agent, plan.workers, plan.leaderboard_dir
    total = plan.budget.max_evaluations
    console.print(
        f"run {store.info.run_id}: {ag.name} on {v.id}@{v.hash}, seed {store.info.seed}, "
        f"{workers} workers -> {store.run_dir}"
    )
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("best {task.fields[best]}"),
        TextColumn("{task.fields[failed]}"),
        TextColumn("{task.fields[train]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=no_progress,
    )
    for line in plan.gpu_lines:
        console.print(f"GPU memory plan: {line}")
    # before the workers start: they (and their sandboxes) read which GPUs and how much is theirs
    os.environ.update(dict(plan.gpu_env))
    # what the bar waits on before the first result (short: a terminal is often 80 columns)
    phases = {
        PHASE_BOUNDS: "scoring the initial program for this key (once per key)",
        PHASE_AGENT: "sandboxes warming up, first candidates",
    }
    task = progress.add_task("starting sandboxes", total=total, best="-", failed="failed 0", train="")
    train_fields = getattr(ag, "progress_fields", None)
    best: list[float | None] = [None]
    failed: Counter[str] = Counter()

    def on_result(ev: Evaluated) -> None:
        if ev.result.status is not Status.OK:
            failed[str(ev.result.status)] += 1
        s = ev.result.score
        if s is not None and (best[0] is None or (s > best[0] if v.maximize else s < best[0])):
            best[0] = s
        train = ""
        if callable(train_fields):  # learning agents: step, last mean reward, adapter version
            f = train_fields()
            train = " ".join(f"{k} {x}" for k, x in f.items())
        progress.update(
            task, advance=1, description=v.id, best=fmt(best[0], 6), failed=failed_text(failed), train=train
        )

    try:
        with (
            stop_signals_interrupt(),
            progress,
            started
            or make_backend(
                plan.backend, workers=workers, mode=plan.mode, prewarm=(v.id,), run_id=store.info.run_id
            ) as b,
        ):
            if started is None:
                b.start(1)  # warms up while the run is set up and the agent prepares (see run_warmup)
            out = drive(
                store,
                variant=v,
                agent=ag,
                backend=b,
                leaderboard_dir=leaderboard_dir,
                on_result=on_result,
                on_phase=lambda p: progress.update(task, description=phases[p]),
            )
        # the final line counts every journaled evaluation, replayed ones included
        failed = Counter(str(r.status) for r in store.rows() if r.status is not Status.OK)
    except KeyboardInterrupt as e:
        why = f" by {e.signal_name}" if isinstance(e, SignalInterrupt) else ""
        err_console.print(f"interrupted{why}; finish it with: bench run --resume {store.run_dir}")
        return EXIT_INTERRUPTED
    except (ResumeError, BackendUnavailable) as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    except LeaderboardPending as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_INFRA
    except BoundsError as e:  # the environment's own program did not score: nothing the agent did
        err_console.print(f"bench: error: {e}; then: bench run --resume {store.run_dir}")
        return EXIT_INFRA
    except EnvironmentImportError as e:  # the family's own code (e.g. its mutations) does not import
        err_console.print(f"bench: error: {e}; fix it, then: bench run --resume {store.run_dir}")
        return EXIT_INFRA
    except OSError as e:
        err_console.print(f"bench: error: {user_error(e)}; then: bench run --resume {store.run_dir}")
        return EXIT_INFRA
    finally:
        store.close()
    i = out.info
    console.print(
        f"{i.status}: {i.n_evaluations} evaluations ({out.evaluated} now, {out.replayed} replayed), "
        f"{failed_text(failed)}, best {fmt(i.best_score, 6)}{key_note(v)}; results in {out.run_dir}"
    )
    headline = (i.agent_summary or {}).get("headline")
    if isinstance(headline, str) and headline:
        console.print(headline)
    return 0


def readd_finished(store: RunStore, v: Variant) -> int:
    """``--resume`` of a finished run: rebuild a damaged snapshot, re-add a missing leaderboard row.

    The store is closed afterwards.

    Returns:
        0 done, 3 (infra) if the snapshot or the row could not be restored (the message printed).
    """
    from harness.runner.repair import repair_run

    try:
        done = repair_run(store, v, only_if_damaged=True)
    except (ValueError, LeaderboardPending, RunStoreError) as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_INFRA
    except OSError as e:
        err_console.print(f"bench: error: {user_error(e)}")
        return EXIT_INFRA
    finally:
        store.close()
    if done.damage:
        console.print(
            f"candidates.parquet was damaged ({done.damage}); rebuilt from the journal ({done.rows} rows)"
        )
    where = store.info.leaderboard_dir
    row = (
        f"its leaderboard row {'was added to' if done.row_added else 'is in'} {where}"
        if where
        else "no leaderboard"
    )
    console.print(f"run {store.info.run_id} already finished; {row}")
    return 0
