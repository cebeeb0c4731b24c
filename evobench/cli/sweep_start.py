"""``bench sweep`` from options to exit code, all of it but the runs themselves.

The grid is checked whole, the sweep directory made, the shared backend started, the runs run
(:mod:`evobench.cli.sweep_exec`), then ``compare`` and the reports.

Imported only when ``bench sweep`` runs (:mod:`evobench.cli.commands_sweep` holds its options).
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.envs.manifest import ManifestError
from harness.envs.registry import UnknownIdError, default_registry
from harness.sandbox.base import Sandbox
from harness.sandbox.factory import BackendUnavailable, make_backend

from .console import console, err_console
from .run_plan import PlanError, RunPlan, plan_run
from .run_warmup import stop
from .sweep_exec import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    Plan,
    SweepRunner,
    cell_args,
    plan_all,
)
from .sweep_grid import GridError, agent_uses, build_spec, check_ids, expand, load_toml
from .sweep_manifest import CellRecord, Manifest, SweepDir, SweepError

RUNS_PER_SLOT = 2
"""Runs at once per evaluation slot (``--concurrency``)."""


@dataclass(frozen=True)
class SweepOptions:
    """``bench sweep``'s options as given (None: not given; see :func:`evobench.cli.commands_sweep.sweep`)."""

    file: Path | None = None
    """The grid's TOML file."""
    grid: tuple[tuple[str, Any], ...] = ()
    """Grid flags as given (``SweepSpec`` fields, ``agents``, ``envs``, ``seeds``, ``agent_config``)."""
    out: Path | None = None
    """The new sweep's directory."""
    results_dir: Path | None = None
    """Where the runs' directories go (default: ``<sweep>/runs``)."""
    leaderboard_dir: Path | None = None
    """Where their leaderboard rows go (default: ``<sweep>/leaderboards``)."""
    resume: Path | None = None
    """A sweep directory to finish."""
    concurrency: int | None = None
    """Evaluations in flight over the grid (overrides the grid's ``concurrency``)."""
    no_progress: bool = False
    """No progress bar."""
    no_report: bool = False
    """Skip the HTML reports at the end."""


def _new_sweep(o: SweepOptions) -> tuple[SweepDir, dict[str, Plan]] | int:
    """Check the grid whole, plan every cell, and only then create the sweep directory."""
    source = str(o.file) if o.file is not None else "command line"
    try:
        spec = build_spec(load_toml(o.file) if o.file else {}, dict(o.grid), source)
        check_ids(spec, source)
        cells = expand(spec, agent_uses)
    except GridError as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    path = o.out or Path("sweeps") / datetime.now(UTC).strftime("sweep-%Y%m%dT%H%M%S")
    results = o.results_dir or Path("runs")
    boards = o.leaderboard_dir or Path("leaderboards")
    # relative defaults live in the sweep directory; given paths are kept as the user meant them
    results_rec = str(results if o.results_dir is None else results.resolve())
    boards_rec = str(boards if o.leaderboard_dir is None else boards.resolve())
    abs_results = path / results if o.results_dir is None else results.resolve()
    abs_boards = path / boards if o.leaderboard_dir is None else boards.resolve()
    plans: dict[str, Plan] = {}
    for c in cells:
        try:
            plans[c.key] = plan_run(cell_args(c, spec, abs_results, abs_boards))
        except (PlanError, UnknownIdError, ManifestError) as e:
            err_console.print(f"bench: error: {c.key}: {e}")
            return e.exit_code if isinstance(e, PlanError) else EXIT_USAGE
    manifest = Manifest(
        sweep_id=path.name,
        command=["bench", *sys.argv[1:]],
        spec=spec,
        results_dir=results_rec,
        leaderboard_dir=boards_rec,
        cells=[CellRecord(cell=c) for c in cells],
    )
    try:
        sweep = SweepDir.create(path, manifest)
    except SweepError as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    return sweep, plans


def shared_backend(sweep: SweepDir, plans: dict[str, Plan], concurrency: int, client: Any = None) -> Sandbox:
    """The grid's one backend: ``concurrency`` workers (0: the most any run asks for).

    ``client``: a Modal client for ``--backend modal`` (tests pass a fake; None: the real SDK).

    Raises:
        BackendUnavailable: If the backend cannot start here.
        PlanError: If the runs plan the GPU's memory differently (they share one set of workers).
    """
    spec = sweep.manifest.spec
    runs = [p for p in plans.values() if isinstance(p, RunPlan)]
    n = concurrency or max((p.workers for p in runs), default=1)
    gpu_envs = {p.gpu_env for p in runs if p.gpu_env}
    if len(gpu_envs) > 1:
        raise PlanError("the runs plan the GPU's memory differently; sweep them separately")
    for env in gpu_envs:  # before the workers start: they read which GPUs are theirs
        os.environ.update(dict(env))
    for line in sorted({line for p in runs for line in p.gpu_lines}):
        console.print(f"GPU memory plan: {line}")
    if spec.backend == "modal" and client is not None:
        from harness.sandbox.modal_backend import ModalBackend

        return ModalBackend(workers=n, mode=spec.mode, client=client, run_id=sweep.manifest.sweep_id)
    backend = make_backend(
        spec.backend, workers=n, mode=spec.mode, prewarm=tuple(spec.envs), run_id=sweep.manifest.sweep_id
    )
    backend.start(1)
    return backend


def finish(sweep: SweepDir, no_report: bool) -> None:
    """``bench compare`` of the configurations the sweep ran (seed-paired), then a report per variant."""
    from harness.compare.identity import IDENTITY_COLUMN, with_identity
    from harness.results.leaderboard import load_leaderboard

    from .commands_compare import compare, report

    spec, results, boards = sweep.manifest.spec, sweep.results_dir, sweep.leaderboard_dir
    ran = {r.run_id: r.cell.name for r in sweep.manifest.cells if r.state == "finished" and r.run_id}
    families = dict.fromkeys(default_registry().get(e).family for e in spec.envs)
    named: dict[str, str] = {}  # cell name -> identity, in grid order
    for family in families:
        lb = with_identity(load_leaderboard(boards, family))
        for run_id, ident in zip(lb["run_id"], lb[IDENTITY_COLUMN], strict=True):
            if run_id in ran:
                named.setdefault(ran[run_id], str(ident))
    order = [n for n in dict.fromkeys(r.cell.name for r in sweep.manifest.cells) if n in named]
    if len(order) < 2:
        console.print("compare: fewer than two agent configurations finished; nothing to compare")
    else:
        console.print(f"compare: {', '.join(order)} on {', '.join(spec.envs)}")
        compare(
            env=tuple(spec.envs),
            agents=tuple(f"{named[n]}={n}" for n in order),
            leaderboard_dir=boards,
            results_dir=results,
        )
    if not no_report:
        for env in spec.envs:
            report(
                env=env, out=sweep.path / f"report-{env}.html", leaderboard_dir=boards, results_dir=results
            )


def start(o: SweepOptions, *, modal_client: Any = None) -> int:
    """``bench sweep``: create (or reopen) the sweep, run what is missing, compare and report.

    Returns:
        0 every cell finished, 2 usage (nothing created), 3 a cell failed or the backend could
        not start, 130 interrupted (resume with ``--resume``).
    """
    sweep: SweepDir | None = None
    if o.resume is not None:
        try:
            sweep = SweepDir.open(o.resume)
        except SweepError as e:
            err_console.print(f"bench: error: {e}")
            return EXIT_USAGE

        def failed(rec: CellRecord, why: str) -> None:
            err_console.print(f"failed   {rec.cell.key}: {why}")

        plans = plan_all(sweep, failed)
    else:
        made = _new_sweep(o)
        if isinstance(made, int):
            return made
        sweep, plans = made
    with sweep:
        spec = sweep.manifest.spec
        todo = len(plans)
        console.print(
            f"sweep {sweep.manifest.sweep_id}: {len(sweep.manifest.cells)} runs "
            f"({len(spec.agents)} agents x {len(spec.envs)} variants x {len(spec.seeds)} seeds), "
            f"{todo} to run -> {sweep.path}"
        )
        concurrency = o.concurrency if o.concurrency is not None else spec.concurrency
        code = 0
        closer: threading.Thread | None = None
        if plans:
            try:
                backend = shared_backend(sweep, plans, concurrency, modal_client)
            except (BackendUnavailable, PlanError) as e:
                err_console.print(f"bench: error: {e}")
                return EXIT_USAGE
            runner = SweepRunner(sweep, plans, backend, no_progress=o.no_progress)
            try:
                # twice the evaluation slots: while one run's agent thinks, another's candidates run
                code = runner.run(runs_at_once=RUNS_PER_SLOT * int(getattr(backend, "workers", 1)))
            except BaseException:
                stop(backend)
                raise
            if code == EXIT_INTERRUPTED:
                stop(backend)
                return code
            # its workers wind down (seconds) while the comparison is computed
            closer = threading.Thread(target=backend.close, name="sweep-close")
            closer.start()
        failed_cells = [r for r in sweep.manifest.cells if r.state != "finished"]
        try:
            finish(sweep, o.no_report)
        finally:
            if closer is not None:
                closer.join()
        if failed_cells:
            err_console.print(
                f"{len(failed_cells)} of {len(sweep.manifest.cells)} runs did not finish; "
                f"after fixing the cause: bench sweep --resume {sweep.path}"
            )
            return 3
        return code
