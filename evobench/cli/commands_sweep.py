"""``bench sweep``: a grid of runs (agents x variants x seeds) in one command; its options and help.

:mod:`evobench.cli.sweep_start` carries it out (imported when it runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import tyro

from harness.sandbox.names import BackendName, Mode


def sweep(
    file: Annotated[Path | None, tyro.conf.Positional] = None,
    agents: str | None = None,
    envs: str | None = None,
    seeds: str | None = None,
    max_evaluations: int | None = None,
    max_wall_s: float | None = None,
    max_cost_usd: float | None = None,
    agent_config: str | None = None,
    model: str | None = None,
    advisor_model: str | None = None,
    implementer_model: str | None = None,
    backend: BackendName | None = None,
    workers: int | None = None,
    mode: Mode | None = None,
    concurrency: int | None = None,
    out: Path | None = None,
    results_dir: Path | None = None,
    leaderboard_dir: Path | None = None,
    resume: Path | None = None,
    no_report: bool = False,
    no_progress: bool = False,
) -> int:
    """Run a grid of agents x variants x seeds as ordinary runs, concurrently; then compare them.

    The grid comes from FILE (TOML, keys in docs/sweep.md) or the flags; a flag given with FILE
    overrides its key. Every cell is a `bench run` (same run directory, leaderboard row and
    `bench run --resume`); the runs share one evaluation backend, whose --concurrency is the limit
    on evaluations in flight over the whole grid. The sweep directory holds `sweep.json` (the grid
    and each cell's run), `runs/`, `leaderboards/` and, at the end, `report-<variant>.html`;
    `bench compare` of what it ran is printed. Exit code: 0 all runs finished, 2 usage (nothing
    created), 3 a run failed, 130 interrupted.

    Args:
        file: TOML file describing the grid.
        agents: Agent ids, comma-separated (``random-search,pacevolve``).
        envs: Variant ids, comma-separated.
        seeds: Seeds: ``1-3``, ``0,4,7`` or both (``0-2,9``).
        max_evaluations: Evaluation budget of every run (default 50).
        max_wall_s: Wall-clock budget of every run, seconds.
        max_cost_usd: LLM cost budget of every run, US dollars.
        agent_config: JSON object of configuration overrides for every agent.
        model: LLM for the agents that use one (others are left as they are).
        advisor_model: Advisor model for the agents that have one.
        implementer_model: Implementer model for the agents that have one.
        backend: Where every evaluation runs (default local).
        workers: Parallel evaluations of each run (default 0: as ``bench run``).
        mode: ``warm`` (default) or ``cold`` sandboxes.
        concurrency: Evaluations in flight over the whole grid, twice as many runs at once
            (default 0: as many as one run's workers; on Modal, that many sandboxes at most).
        out: Directory of a new sweep (default ``sweeps/sweep-<UTC time>``).
        results_dir: Where the run directories go (default ``<sweep>/runs``).
        leaderboard_dir: Where the runs' leaderboard rows go (default ``<sweep>/leaderboards``).
        resume: A sweep directory to finish: interrupted runs are resumed, missing ones started,
            finished ones left alone (never a second run of a cell). Only --concurrency,
            --no-progress and --no-report may be given with it.
        no_report: Do not write the HTML reports at the end.
        no_progress: No progress bar (a line per finished run is still printed).
    """
    from .console import err_console
    from .sweep_start import SweepOptions, start

    grid = {
        "agents": agents, "envs": envs, "seeds": seeds, "max_evaluations": max_evaluations,
        "max_wall_s": max_wall_s, "max_cost_usd": max_cost_usd, "agent_config": agent_config,
        "model": model, "advisor_model": advisor_model, "implementer_model": implementer_model,
        "backend": backend, "workers": workers, "mode": mode,
    }  # fmt: skip
    if resume is not None:
        given = [k for k, v in grid.items() if v is not None]
        given += [k for k, v in (("file", file), ("out", out), ("results_dir", results_dir)) if v is not None]
        given += ["leaderboard_dir"] if leaderboard_dir is not None else []
        if given:
            flags = ", ".join("FILE" if k == "file" else "--" + k.replace("_", "-") for k in given)
            err_console.print(
                f"bench: error: --resume {resume} continues the sweep as recorded; drop {flags} "
                "(only --concurrency, --no-progress and --no-report may change)"
            )
            return 2
    opts = SweepOptions(
        file=file,
        grid=tuple(grid.items()),
        out=out,
        results_dir=results_dir,
        leaderboard_dir=leaderboard_dir,
        resume=resume,
        concurrency=concurrency,
        no_progress=no_progress,
        no_report=no_report,
    )
    try:
        return start(opts)
    except KeyboardInterrupt:  # before the runs started (planning, the workers' start): nothing half-done
        where = resume or out
        made = where is not None and where.exists()
        tail = f"; finish it with: bench sweep --resume {where}" if made else ""
        err_console.print(f"interrupted before the sweep's runs started{tail}")
        return 130
