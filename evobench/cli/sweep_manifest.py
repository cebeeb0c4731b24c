"""A sweep directory's ``sweep.json``: the grid, and which run directory each cell has.

Written atomically (a reader, or a sweep killed mid-write, sees the old manifest or the new one)
and always before what it records happens: a cell's run id is recorded before its run directory
is created, so a sweep killed at any moment resumes that run instead of starting a second one
with the same seed. The directory's ``.lock`` keeps two ``bench sweep`` processes out of one sweep.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from harness.results.atomic import LockHeldError, atomic_write_text, lock_file, unlock_file
from harness.results.records import utc_now_iso
from harness.results.store import LOCK, RUN_JSON

from .sweep_grid import Cell, SweepSpec

MANIFEST = "sweep.json"
"""The manifest's file name in a sweep directory."""
MANIFEST_VERSION = 1
"""Format version of ``sweep.json``."""
CellState = Literal["pending", "running", "finished", "failed"]


class SweepError(RuntimeError):
    """A sweep directory cannot be used (missing, locked, unreadable); the message is for the user."""


class CellRecord(BaseModel):
    """A cell and where its run stands."""

    model_config = ConfigDict(extra="forbid")

    cell: Cell
    """What the cell runs."""
    run_id: str | None = None
    """Its run's id (set before the run directory is created; None: not started)."""
    state: CellState = "pending"
    """``pending`` (no run yet), ``running`` (started, not known finished), ``finished``, ``failed``."""
    error: str = ""
    """Why the last attempt failed (one line)."""


class Manifest(BaseModel):
    """The whole ``sweep.json``."""

    model_config = ConfigDict(extra="forbid")

    version: int = MANIFEST_VERSION
    """Format version."""
    sweep_id: str
    """The sweep's id (its directory name; tags its Modal sandboxes)."""
    created_at: str = Field(default_factory=utc_now_iso)
    """When the sweep was created (UTC, ISO 8601)."""
    command: list[str] = Field(default_factory=list)
    """The command that created it."""
    spec: SweepSpec
    """The grid, every flag applied."""
    results_dir: str
    """Where the run directories are (relative paths: to the sweep directory)."""
    leaderboard_dir: str
    """Where the runs' leaderboard rows go (relative paths: to the sweep directory)."""
    cells: list[CellRecord]
    """One per run, in the order they start."""


class SweepDir:
    """An open, locked sweep directory; cell updates are serialised and written at once.

    Use as a context manager (the lock is released on exit).
    """

    def __init__(self, path: Path, manifest: Manifest, lock_fd: int) -> None:
        """Wrap a locked directory; use :meth:`create` or :meth:`open`."""
        self.path = path
        self.manifest = manifest
        self._lock_fd: int | None = lock_fd
        self._mutex = threading.Lock()

    @staticmethod
    def _lock(path: Path) -> int:
        try:
            return lock_file(path / LOCK, stamp=f"pid {os.getpid()}\n")
        except LockHeldError as e:
            raise SweepError(
                f"{path} is being run by {e.holder}; wait for it, or stop it and resume"
            ) from None

    @classmethod
    def create(cls, path: Path, manifest: Manifest) -> SweepDir:
        """Make the directory (it must not exist, or be empty) and write the manifest.

        Raises:
            SweepError: If the directory holds anything already, or cannot be made.
        """
        if path.exists() and (not path.is_dir() or any(path.iterdir())):
            raise SweepError(
                f"{path} exists already; resume it with --resume {path}, or choose another --out"
            )
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise SweepError(f"cannot create {path}: {e.strerror or e}") from None
        out = cls(path, manifest, cls._lock(path))
        out.save()
        return out

    @classmethod
    def open(cls, path: Path) -> SweepDir:
        """Lock an existing sweep directory and read its manifest.

        Raises:
            SweepError: If it is not a sweep directory, is locked, or its manifest is unreadable.
        """
        if not (path / MANIFEST).is_file():
            raise SweepError(f"{path} is not a sweep directory ({MANIFEST} is missing)")
        fd = cls._lock(path)
        try:
            manifest = Manifest.model_validate_json((path / MANIFEST).read_bytes())
        except (OSError, ValidationError) as e:
            unlock_file(fd)
            raise SweepError(f"{path / MANIFEST} is unreadable: {str(e).splitlines()[0]}") from None
        return cls(path, manifest, fd)

    def close(self) -> None:
        """Release the lock; idempotent."""
        if self._lock_fd is not None:
            unlock_file(self._lock_fd, clear=True)
            self._lock_fd = None

    def __enter__(self) -> SweepDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def save(self) -> None:
        """Write the manifest atomically."""
        atomic_write_text(self.path / MANIFEST, self.manifest.model_dump_json(indent=2) + "\n")

    def update(self, key: str, **fields: object) -> CellRecord:
        """Set fields of the cell ``key`` and write the manifest before returning."""
        with self._mutex:
            for i, rec in enumerate(self.manifest.cells):
                if rec.cell.key == key:
                    new = rec.model_copy(update=fields)
                    self.manifest.cells[i] = new
                    self.save()
                    return new
        raise KeyError(key)

    def resolve(self, recorded: str) -> Path:
        """A recorded directory (relative: to the sweep directory)."""
        p = Path(recorded)
        return p if p.is_absolute() else self.path / p

    @property
    def results_dir(self) -> Path:
        """Where the run directories are."""
        return self.resolve(self.manifest.results_dir)

    @property
    def leaderboard_dir(self) -> Path:
        """Where the leaderboard rows go."""
        return self.resolve(self.manifest.leaderboard_dir)


def stillborn(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a run directory killed while being created (no ``run.json``, nothing else).

    Only its lock file may be there: nothing was evaluated, so it can be removed and made again.
    """
    return (
        run_dir.is_dir()
        and not (run_dir / RUN_JSON).exists()
        and {p.name for p in run_dir.iterdir()} <= {LOCK}
    )


def remove_stillborn(run_dir: Path) -> None:
    """Remove a :func:`stillborn` run directory (checked again here)."""
    if stillborn(run_dir):
        shutil.rmtree(run_dir)
