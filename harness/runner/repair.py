"""Rebuild what a run derives from its journal: ``candidates.parquet`` and a finished run's leaderboard row.

The journal (``candidates.jsonl``, fsync'ed per row) is the record; the Parquet snapshot is
rewritten from it. A damaged snapshot (a disk error, a copy cut short) then costs nothing:
``bench repair RUN_DIR`` (or ``bench run --resume`` of a finished run) rebuilds it, and
``compare``, ``plot`` and ``report`` skip the run until then, naming that command.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.compare.anytime import parquet_problem
from harness.envs.registry import Variant
from harness.results.candidates import CANDIDATES_SCHEMA_VERSION
from harness.results.store import RunStore

from .completion import readd


@dataclass(frozen=True)
class Repair:
    """What :func:`repair_run` found and did."""

    damage: str | None
    """What was wrong with ``candidates.parquet`` (None: it was readable and held every journaled row)."""
    old_version: int | None
    """The older results schema version a sound snapshot was written in (None: the current one, or
    no snapshot); such a snapshot is always rewritten in the current schema."""
    rows: int | None
    """Rows written from the journal (None: the snapshot was sound and left as it was)."""
    row_added: bool
    """Whether the finished run's leaderboard row had to be (re-)added."""


def snapshot_damage(store: RunStore) -> str | None:
    """What is wrong with the run's ``candidates.parquet`` (None: readable, every journaled row in it).

    A run that has not flushed yet (no snapshot, no journal rows) is not damaged.

    Raises:
        RunStoreError: If the journal itself is corrupt (then nothing can be rebuilt from it).
    """
    import pyarrow.parquet as pq

    journaled = len(store.rows())
    path = store.parquet_path
    if not path.exists():
        return "missing" if journaled else None
    problem = parquet_problem(path, full=True)
    if problem is not None:
        return f"unreadable: {problem}"
    held = pq.read_metadata(path).num_rows
    if held != journaled and store.info.status == "finished":
        return f"{held} rows where the journal has {journaled}"
    return None


def repair_run(store: RunStore, variant: Variant | None, *, only_if_damaged: bool = False) -> Repair:
    """Rewrite ``candidates.parquet`` from the journal; re-add a finished run's missing leaderboard row.

    A snapshot of an older results schema is rewritten in the current one (the migration of old
    run directories), even with ``only_if_damaged``.

    Args:
        store: The run, opened for writing (its lock held).
        variant: The run's variant (to rebuild a leaderboard row that was never queued); None if
            unknown here.
        only_if_damaged: Leave a sound snapshot as it is (``--resume`` of a finished run).

    Returns:
        What was found and done.

    Raises:
        RunStoreError: If the store is read-only or the journal is corrupt.
        OSError: If a file cannot be written (the previous snapshot is then intact).
        LeaderboardPending: If the leaderboard row cannot be appended (it stays queued).
        ValueError: If a finished run's row is neither queued nor rebuildable (no variant).
    """
    damage = snapshot_damage(store)
    version = store.parquet_schema_version() if damage is None else None
    old = version if version is not None and version < CANDIDATES_SCHEMA_VERSION else None
    rows = store.flush_parquet() if damage is not None or old is not None or not only_if_damaged else None
    added = False
    if store.info.status == "finished" and store.info.leaderboard_dir is not None:
        added = readd(store, variant)
    return Repair(damage=damage, old_version=old, rows=rows, row_added=added)
