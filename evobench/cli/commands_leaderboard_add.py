"""``bench leaderboard add RUN_DIR``: put a finished run's row on its leaderboard (again).

For a run whose append failed (the row was queued in the run directory), or whose row was lost
from the leaderboard file. Idempotent: the row replaces any row with the same run id.
"""

from __future__ import annotations

from pathlib import Path

import tyro

from harness.envs.registry import UnknownIdError, default_registry
from harness.results.store import RunStore, RunStoreError
from harness.runner.completion import LeaderboardPending, readd

from .console import console, err_console
from .failures import user_error

EXIT_USAGE, EXIT_INFRA = 2, 3


def leaderboard_add(run_dir: tyro.conf.Positional[Path], leaderboard_dir: Path | None = None) -> int:
    """Add a finished run's row to its leaderboard (the directory recorded in its run.json).

    Args:
        run_dir: The finished run's directory.
        leaderboard_dir: Another leaderboards directory (recorded in the run from then on).
    """
    try:
        store = RunStore.open(run_dir)
    except (RunStoreError, OSError) as e:
        err_console.print(f"bench: error: {user_error(e)}")
        return EXIT_USAGE
    try:
        try:
            variant = default_registry().get(store.info.env_id)
        except UnknownIdError:
            variant = None  # the queued row is enough
        added = readd(store, variant, leaderboard_dir)
    except ValueError as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    except LeaderboardPending as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_INFRA
    except OSError as e:
        err_console.print(f"bench: error: {user_error(e)}")
        return EXIT_INFRA
    finally:
        store.close()
    where = store.info.leaderboard_dir
    done = f"row added to {where}" if added else f"row already in {where}"
    console.print(f"{store.info.run_id}: {done}")
    return 0


def main(argv: list[str]) -> int:
    """Parse ``bench leaderboard add`` arguments and run it."""
    return int(tyro.cli(leaderboard_add, args=argv, prog="bench leaderboard add"))
