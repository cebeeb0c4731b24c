"""``bench repair RUN_DIR``: rebuild a run's ``candidates.parquet`` (and leaderboard row) from its journal."""

from __future__ import annotations

from pathlib import Path

import tyro

from .console import console, err_console

EXIT_USAGE, EXIT_INFRA = 2, 3


def repair(run_dir: tyro.conf.Positional[Path]) -> int:
    """Rebuild a run's candidates.parquet from its journal, and a finished run's missing leaderboard row.

    The snapshot is written in the current results schema (``docs/results.md``), so this also
    migrates a run directory written by an older evobench.
    The journal (``candidates.jsonl``, synced per evaluation) is the run's record; the Parquet
    snapshot and the leaderboard row are derived from it. ``compare``, ``plot`` and ``report``
    skip a run whose snapshot is unreadable and name this command. A run still being written
    (locked by its process) is refused. Exit code: 0 repaired or sound, 2 not a run / locked /
    corrupt journal, 3 a file or the leaderboard could not be written.

    Args:
        run_dir: The run directory (``results/<run-id>``).
    """
    from harness.envs.registry import UnknownIdError, Variant, default_registry
    from harness.results.store import RunStore, RunStoreError
    from harness.runner.completion import LeaderboardPending
    from harness.runner.repair import repair_run

    from .failures import user_error

    try:
        with RunStore.open(run_dir) as store:
            variant: Variant | None
            try:
                variant = default_registry().get(store.info.env_id)
            except UnknownIdError:
                variant = None  # only needed to rebuild a leaderboard row that was never queued
            done = repair_run(store, variant)
            info = store.info
    except RunStoreError as e:
        err_console.print(f"bench: error: {user_error(e)}")
        return EXIT_USAGE
    except (LeaderboardPending, ValueError, OSError) as e:
        err_console.print(f"bench: error: {user_error(e) if isinstance(e, OSError) else e}")
        return EXIT_INFRA
    what = f"was damaged ({done.damage})" if done.damage else "was sound"
    if done.old_version is not None:
        what = f"was in results schema version {done.old_version}"
    console.print(
        f"run {info.run_id}: candidates.parquet {what}; rewritten from the journal ({done.rows} rows)"
    )
    if info.status == "finished" and info.leaderboard_dir is not None:
        where = "added to" if done.row_added else "already in"
        console.print(f"its leaderboard row is {where} {info.leaderboard_dir}")
    elif info.status != "finished":
        console.print(f"the run is {info.status}: finish it with: bench run --resume {run_dir}")
    return 0
