"""``bench sweep`` carried out: the grid's runs, concurrently, over one shared evaluation backend.

Every cell is an ordinary run (:func:`~evobench.cli.run_plan.plan_run`, the run store, ``drive``):
the same run directory, leaderboard row and ``bench run --resume`` as a run started by hand. The
runs execute in threads of this process and submit their candidates through a :class:`Lane` to
one backend whose ``workers`` are the sweep's global limit on evaluations in flight (locally one
pool of sandbox workers, which evaluates any variant; on Modal that many sandboxes at most).
Agents that own a trainable policy (``plan_gpu_memory``: the learning agents, which seed torch's
process-wide generator and plan the GPU for themselves) run one at a time after the others.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, InvalidStateError, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.envs.registry import Variant
from harness.evaluation.result import EvalResult, Status
from harness.runner.context import Evaluated
from harness.runner.runner import drive, new_run_id, open_for_resume
from harness.sandbox.base import Sandbox

from .console import console, err_console, fmt
from .failures import SignalInterrupt, stop_signals_interrupt, user_error
from .run_exec import create_store, failed_text, precheck, readd_finished
from .run_plan import PlanError, ReaddPlan, RunArgs, RunPlan, plan_run
from .sweep_grid import Cell, SweepSpec
from .sweep_manifest import CellRecord, SweepDir, remove_stillborn

EXIT_OK, EXIT_USAGE, EXIT_INFRA, EXIT_INTERRUPTED = 0, 2, 3, 130
JOIN_S = 30.0
"""How long a stopping sweep waits for its runs to record themselves interrupted."""


class SweepStopped(KeyboardInterrupt):
    """The sweep is stopping (Ctrl-C, a stop signal): raised in a run's thread, which records it."""


class Lane(Sandbox):
    """One run's view of the sweep's shared backend: its own worker count, no ownership.

    Closing a lane closes nothing (the sweep owns the backend); :meth:`stop` fails the run's
    pending evaluations and later submissions with :class:`SweepStopped`.
    """

    def __init__(self, shared: Sandbox, workers: int, stopping: threading.Event) -> None:
        """Wrap ``shared`` for a run that submits ``workers`` evaluations at a time."""
        self.shared = shared
        self.workers = workers
        self.name = shared.name
        self._stopping = stopping
        self._pending: set[Future[EvalResult]] = set()
        self._lock = threading.Lock()

    def submit(self, variant: Variant, source: str) -> Future[EvalResult]:
        """Queue one evaluation on the shared backend.

        Raises:
            SweepStopped: If the sweep is stopping.
            RuntimeError: If the shared backend has been closed.
        """
        if self._stopping.is_set():
            raise SweepStopped("the sweep is stopping")
        out: Future[EvalResult] = Future()
        with self._lock:
            self._pending.add(out)
        inner = self.shared.submit(variant, source)

        def done(f: Future[EvalResult]) -> None:
            with self._lock:
                self._pending.discard(out)
            try:
                out.set_result(f.result())
            except InvalidStateError:  # stopped meanwhile: the run already saw SweepStopped
                pass
            except BaseException as e:  # noqa: BLE001 - a cancelled job (the sweep stopping)
                try:
                    out.set_exception(e)
                except InvalidStateError:
                    pass

        inner.add_done_callback(done)
        return out

    def stop(self) -> None:
        """Fail every pending evaluation of this run with :class:`SweepStopped`."""
        with self._lock:
            pending, self._pending = list(self._pending), set()
        for f in pending:
            try:
                f.set_exception(SweepStopped("the sweep is stopping"))
            except InvalidStateError:
                pass

    def close(self) -> None:
        """Nothing to release: the sweep closes the shared backend."""

    def terminate(self) -> None:
        """Fail this run's pending evaluations (the sweep terminates the shared backend)."""
        self.stop()


def cell_args(cell: Cell, spec: SweepSpec, results_dir: Path, leaderboard_dir: Path) -> RunArgs:
    """The ``bench run`` options of a cell."""
    return RunArgs(
        agent=cell.agent, env=cell.env, seed=cell.seed, backend=spec.backend, workers=spec.workers,
        max_evaluations=spec.max_evaluations, max_wall_s=spec.max_wall_s, max_cost_usd=spec.max_cost_usd,
        agent_config=json.dumps(cell.overrides, sort_keys=True), mode=spec.mode,
        results_dir=results_dir, leaderboard_dir=leaderboard_dir, label=cell.label,
    )  # fmt: skip


def cell_command(a: RunArgs) -> list[str]:
    """The ``bench run`` command that runs the cell alone (recorded in its ``run.json``)."""
    cmd = ["bench", "run", "--agent", str(a.agent), "--env", str(a.env), "--seed", str(a.seed)]
    cmd += ["--max-evaluations", str(a.max_evaluations), "--agent-config", a.agent_config]
    for flag, value in (("--max-wall-s", a.max_wall_s), ("--max-cost-usd", a.max_cost_usd)):
        cmd += [flag, str(value)] if value is not None else []
    cmd += ["--backend", a.backend, "--workers", str(a.workers), "--mode", a.mode]
    cmd += ["--label", a.label] if a.label else []
    return [*cmd, "--results-dir", str(a.results_dir), "--leaderboard-dir", str(a.leaderboard_dir)]


Plan = RunPlan | ReaddPlan


def plan_cell(sweep: SweepDir, rec: CellRecord) -> Plan:
    """The plan of a cell: a new run (also one whose directory was never made), or its run resumed.

    Raises:
        PlanError: If the cell cannot run here.
        UnknownIdError: If its agent or variant is no longer known.
        ManifestError: If its variant's manifest is invalid.
    """
    if rec.run_id is not None:
        run_dir = sweep.results_dir / rec.run_id
        remove_stillborn(run_dir)  # killed while being created: nothing in it was evaluated
        if run_dir.exists():
            return plan_run(RunArgs(resume=run_dir))
    return plan_run(cell_args(rec.cell, sweep.manifest.spec, sweep.results_dir, sweep.leaderboard_dir))


def runs_alone(agent: object) -> bool:
    """Whether an agent (or agent class) must run alone: it owns a trainable policy (``plan_gpu_memory``).

    Such agents seed torch's process-wide generator and plan the GPU's memory for themselves.
    """
    return callable(getattr(agent, "plan_gpu_memory", None))


def exclusive(plan: Plan) -> bool:
    """Whether the plan's run must run alone (:func:`runs_alone`; a finished run never must)."""
    return isinstance(plan, RunPlan) and runs_alone(plan.agent)


@dataclass
class _Tally:
    """What the grid's progress line counts (updated from the runs' threads under the lock)."""

    total: int
    done: int = 0
    failed: int = 0
    running: int = 0

    def text(self) -> str:
        return f"runs {self.done}/{self.total} done, {self.running} running, {self.failed} failed"


class SweepRunner:
    """Runs a sweep's unfinished cells over one shared backend; :meth:`run` returns the exit code."""

    def __init__(
        self, sweep: SweepDir, plans: dict[str, Plan], backend: Sandbox, *, no_progress: bool
    ) -> None:
        """Prepare (nothing starts until :meth:`run`).

        Args:
            sweep: The open sweep directory.
            plans: The plan of every cell to run, by cell key.
            backend: The shared backend (its ``workers``: the global limit on evaluations in flight).
            no_progress: No progress bar (a line per finished cell is still printed).
        """
        self.sweep, self.plans, self.backend = sweep, plans, backend
        self.stopping = threading.Event()
        self._lanes: set[Lane] = set()
        self._lock = threading.Lock()
        cells = sweep.manifest.cells
        self.tally = _Tally(total=len(cells), done=sum(r.state == "finished" for r in cells))
        budget = sweep.manifest.spec.max_evaluations
        self.progress = Progress(
            TextColumn("[bold]grid"), BarColumn(), MofNCompleteColumn(), TextColumn("evaluations"),
            TextColumn("{task.fields[runs]}"), TimeElapsedColumn(), console=console, disable=no_progress,
        )  # fmt: skip
        self.task = self.progress.add_task("grid", total=len(cells) * budget, runs=self.tally.text())
        self.progress.update(self.task, completed=self.tally.done * budget)

    def _count(self, **delta: int) -> None:
        with self._lock:
            for k, d in delta.items():
                setattr(self.tally, k, getattr(self.tally, k) + d)
            self.progress.update(self.task, runs=self.tally.text())

    def _line(self, rec: CellRecord, text: str) -> None:
        self.progress.console.print(f"{rec.state:8} {rec.cell.key}: {text}", markup=False, highlight=False)

    def run_cell(self, key: str) -> None:
        """Run (or resume) one cell to its end and record it; raises nothing but SweepStopped."""
        rec = next(r for r in self.sweep.manifest.cells if r.cell.key == key)
        plan = self.plans[key]
        lane = Lane(self.backend, plan.workers if isinstance(plan, RunPlan) else 1, self.stopping)
        with self._lock:
            self._lanes.add(lane)
        self._count(running=1)
        try:
            text = self._drive(rec, plan, lane)
        except SweepStopped:
            raise
        except Exception as e:  # noqa: BLE001 - one cell's failure is reported; the grid goes on
            rec = self.sweep.update(key, state="failed", error=user_error(e).splitlines()[0][:500])
            self._count(failed=1)
            self._line(rec, rec.error)
            return
        finally:
            self._count(running=-1)
            with self._lock:
                self._lanes.discard(lane)
        rec = self.sweep.update(key, state="finished", error="")
        self._count(done=1)
        self._line(rec, text)

    def _drive(self, rec: CellRecord, plan: Plan, lane: Lane) -> str:
        stopped = precheck(plan)
        if stopped is not None:
            raise RuntimeError(stopped[0])
        if isinstance(plan, RunPlan) and plan.resume is None:
            run_id = rec.run_id or new_run_id(plan.variant, plan.agent.name, plan.seed)
            # recorded before the directory exists: a kill in between resumes this id, never a second run
            rec = self.sweep.update(rec.cell.key, run_id=run_id, state="running")
            args = cell_args(rec.cell, self.sweep.manifest.spec, plan.results_dir, plan.leaderboard_dir)
            store = create_store(plan, command=cell_command(args), run_id=run_id)
        else:
            rec = self.sweep.update(rec.cell.key, state="running")
            store = open_for_resume(plan.run_dir if isinstance(plan, ReaddPlan) else plan.resume)  # type: ignore[arg-type]
        budget = self.sweep.manifest.spec.max_evaluations
        if isinstance(plan, ReaddPlan) or store.info.status == "finished":
            if readd_finished(store, plan.variant) != 0:
                raise RuntimeError(
                    f"run {store.run_dir} finished but its leaderboard row could not be restored"
                )
            self.progress.update(self.task, advance=budget)
            return f"already finished -> {store.run_dir}"
        seen = [0]

        def on_result(ev: Evaluated) -> None:
            seen[0] += 1
            self.progress.update(self.task, advance=1)

        try:
            out = drive(
                store, variant=plan.variant, agent=plan.agent, backend=lane,
                leaderboard_dir=plan.leaderboard_dir, on_result=on_result,
            )  # fmt: skip
            failed = Counter(str(r.status) for r in store.rows() if r.status is not Status.OK)
        finally:
            store.close()
        self.progress.update(self.task, advance=max(0, budget - seen[0]))  # a run that ended early
        i = out.info
        return (
            f"{i.n_evaluations} evaluations ({out.evaluated} now, {out.replayed} replayed), "
            f"{failed_text(failed)}, best {fmt(i.best_score, 6)} -> {out.run_dir}"
        )

    def _stop(self) -> None:
        self.stopping.set()
        with self._lock:
            lanes = list(self._lanes)
        for lane in lanes:
            lane.stop()

    def run(self, runs_at_once: int) -> int:
        """Run every planned cell (``runs_at_once`` at a time; exclusive ones alone, last).

        Returns:
            0 every cell finished, 3 some failed, 130 interrupted (Ctrl-C, SIGTERM, SIGHUP).
        """
        keys = list(self.plans)
        shared = [k for k in keys if not exclusive(self.plans[k])]
        alone = [k for k in keys if exclusive(self.plans[k])]
        pool = ThreadPoolExecutor(max(1, runs_at_once), thread_name_prefix="sweep-run")
        try:
            with stop_signals_interrupt(), self.progress:
                self._wait([pool.submit(self.run_cell, k) for k in shared])
                for k in alone:
                    self._wait([pool.submit(self.run_cell, k)])
        except KeyboardInterrupt as e:
            self._stop()
            pool.shutdown(wait=False, cancel_futures=True)
            joiner = threading.Thread(target=pool.shutdown, kwargs={"wait": True}, daemon=True)
            joiner.start()
            joiner.join(JOIN_S)  # the runs record themselves interrupted (a kill -9 needs no such care)
            why = f" by {e.signal_name}" if isinstance(e, SignalInterrupt) else ""
            err_console.print(f"interrupted{why}; finish it with: bench sweep --resume {self.sweep.path}")
            return EXIT_INTERRUPTED
        finally:
            pool.shutdown(wait=False)
        return EXIT_INFRA if self.tally.failed else EXIT_OK

    @staticmethod
    def _wait(futures: list[Future[None]]) -> None:
        pending = set(futures)
        while pending:  # short waits: Ctrl-C and stop signals land in this (the main) thread
            done, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            for f in done:
                f.result()  # SweepStopped from a run means the sweep is stopping anyway


def plan_all(sweep: SweepDir, on_error: Callable[[CellRecord, str], None]) -> dict[str, Plan]:
    """Plans of the cells not finished; a cell that cannot be planned is marked failed (``on_error``)."""
    from harness.envs.manifest import ManifestError
    from harness.envs.registry import UnknownIdError

    plans: dict[str, Plan] = {}
    for rec in sweep.manifest.cells:
        if rec.state == "finished":
            continue
        try:
            plans[rec.cell.key] = plan_cell(sweep, rec)
        except (PlanError, UnknownIdError, ManifestError) as e:
            on_error(sweep.update(rec.cell.key, state="failed", error=str(e).splitlines()[0]), str(e))
    return plans
