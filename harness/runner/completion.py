"""A run's last step, ordered and idempotent: queue the leaderboard row, append it, then ``finished``.

The row is first written into the run directory (``leaderboard_row.json``), so a failed append
(a lock held too long, a full or read-only leaderboard disk) never loses it: ``run.json`` then
says ``finished`` with ``leaderboard: pending``, and ``bench leaderboard add RUN_DIR`` or
``bench run --resume RUN_DIR`` appends it later. Appending replaces any row with the same run id,
so every retry is safe.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from harness.envs.manifest import Direction
from harness.envs.registry import Variant
from harness.results.atomic import atomic_write_json
from harness.results.leaderboard import (
    append_leaderboard_row,
    best_evaluation,
    best_program,
    build_leaderboard_row,
    load_leaderboard,
)
from harness.results.records import CandidateRow, LeaderboardRow, RunInfo
from harness.results.store import RunStore, program_paths

log = logging.getLogger(__name__)

ROW_FILE = "leaderboard_row.json"
"""The queued leaderboard row inside a finished run's directory."""


class LeaderboardPending(RuntimeError):
    """The run finished but its leaderboard row could not be appended; it is queued for retry."""

    def __init__(self, run_dir: Path, leaderboard_dir: Path, cause: BaseException) -> None:
        """Describe the failed append and how to retry it."""
        super().__init__(
            f"the run finished, but its leaderboard row could not be added to {leaderboard_dir}: "
            f"{describe_error(cause)}; the row is kept in {run_dir / ROW_FILE}; "
            f"add it with: bench leaderboard add {run_dir}"
        )
        self.run_dir, self.leaderboard_dir, self.cause = run_dir, leaderboard_dir, cause


def describe_error(e: BaseException) -> str:
    """One line for an error (an ``OSError`` with its path and reason)."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}: {e.filename}" if e.filename else e.strerror
    return f"{type(e).__name__}: {e}".splitlines()[0]


def _ledger_cost(run_dir: Path) -> float | None:
    """Total LLM spend recorded in the run's ledger, or None for runs without LLM calls."""
    if not (run_dir / "llm_calls.jsonl").exists():
        return None
    from harness.llm.ledger import Ledger

    return Ledger(run_dir).cost_usd


def make_row(info: RunInfo, rows: list[CandidateRow], variant: Variant, run_dir: Path) -> LeaderboardRow:
    """The run's leaderboard row (the LLM ledger is the authority on spend, incl. untied calls)."""
    row = build_leaderboard_row(info, rows, variant, program_paths=program_paths(run_dir))
    spent = _ledger_cost(run_dir)
    if spent is not None:
        row = row.model_copy(update={"cost_usd": max(row.cost_usd, spent)})
    return row


def queued_row(run_dir: Path) -> LeaderboardRow | None:
    """The row queued in a run directory (None when there is none or it is unreadable)."""
    try:
        return LeaderboardRow.model_validate(json.loads((run_dir / ROW_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return None


def complete(store: RunStore, final: RunInfo, rows: list[CandidateRow], variant: Variant) -> RunInfo:
    """Record a finished run: queue its row, append it, and only then mark ``run.json`` finished.

    Args:
        store: The run (writable).
        final: The header to write, with everything but the status and leaderboard state.
        rows: The journal.
        variant: The variant the run evaluated.

    Returns:
        The header as written.

    Raises:
        LeaderboardPending: If the append failed (``run.json`` says finished, row pending).
        OSError: If the row cannot be queued in the run directory (``run.json`` is not finished).
    """
    if final.leaderboard_dir is None:
        info = final.model_copy(update={"status": "finished", "leaderboard": "none"})
        store.write_info(info)
        return info
    row = make_row(final, rows, variant, store.run_dir)
    atomic_write_json(store.run_dir / ROW_FILE, row.model_dump(mode="json"))
    return _append(store, final.model_copy(update={"status": "finished"}), row)


def _append(store: RunStore, info: RunInfo, row: LeaderboardRow) -> RunInfo:
    assert info.leaderboard_dir is not None
    directory = Path(info.leaderboard_dir)
    failure: BaseException | None = None
    try:
        append_leaderboard_row(directory, row)
    except (OSError, ValueError) as e:  # LockHeldError is a TimeoutError, i.e. an OSError
        failure = e
    info = info.model_copy(update={"leaderboard": "pending" if failure else "added"})
    store.write_info(info)
    if failure is not None:
        raise LeaderboardPending(store.run_dir, directory, failure) from failure
    return info


def readd(store: RunStore, variant: Variant | None = None, leaderboard_dir: Path | None = None) -> bool:
    """Make sure a finished run's row is on its leaderboard (idempotent).

    Args:
        store: The finished run (writable).
        variant: Its variant, to rebuild a row that was never queued (older runs).
        leaderboard_dir: Override the recorded leaderboards directory (it is then recorded).

    A queued row of results schema 1 (no ``best_program_sha``) gets its best program from the
    journal and replaces the one on the leaderboard.

    Returns:
        True when the row had to be (re-)added or refreshed, False when it was already there.

    Raises:
        ValueError: If the run is not finished, or has no row and no variant to rebuild it.
        LeaderboardPending: If the append fails again.
    """
    info = store.info
    if info.status != "finished":
        raise ValueError(
            f"run {info.run_id} is {info.status}, not finished: finish it with bench run --resume"
        )
    if leaderboard_dir is not None:
        info = info.model_copy(update={"leaderboard_dir": str(leaderboard_dir.resolve())})
    if info.leaderboard_dir is None:
        raise ValueError(f"run {info.run_id} records no leaderboards directory: pass --leaderboard-dir")
    row = queued_row(store.run_dir)
    stale = False
    if row is None:
        if variant is None:
            raise ValueError(f"{store.run_dir / ROW_FILE} is missing and the variant is unknown")
        row = make_row(info, store.rows(), variant, store.run_dir)
        atomic_write_json(store.run_dir / ROW_FILE, row.model_dump(mode="json"))
    elif row.best_score is not None and row.best_program_sha is None:  # a row of results schema 1
        best = best_evaluation(store.rows(), maximize=row.direction is Direction.MAXIMIZE)
        row = row.model_copy(update=best_program(best, store.program_paths()))
        atomic_write_json(store.run_dir / ROW_FILE, row.model_dump(mode="json"))
        stale = True  # the append replaces the old row
    present = _on_leaderboard(Path(info.leaderboard_dir), row)
    if present and not stale and info.leaderboard == "added" and info == store.info:
        return False
    _append(store, info, row)
    return not present or stale


def _on_leaderboard(directory: Path, row: LeaderboardRow) -> bool:
    try:
        df = load_leaderboard(directory, row.family)
    except Exception:  # noqa: BLE001 - unreadable counts as absent; the append reports the real error
        return False
    return bool((df["run_id"] == row.run_id).any()) if "run_id" in df else False
