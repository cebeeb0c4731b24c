"""One run's directory on disk: header, evaluation journal, programs and checkpoints.

Layout of ``results/<run-id>/``::

    run.json             RunInfo, rewritten atomically
    candidates.jsonl     append-only journal, one CandidateRow per line, fsync'ed per append
    candidates.parquet   typed snapshot of the journal (harness.results.candidates), rewritten
                         atomically by flush_parquet()
    programs/ab/<sha256>.<ext>   content-addressed program texts
    checkpoints/<name>   agent checkpoints (JSON via save_checkpoint)
    .lock                flock'ed by the one process writing the run; holds its pid

The journal is the source of truth: a killed run loses at most the line being written (a torn
last line is ignored on read and cut off when the run is reopened for writing), and the parquet
file is always a complete snapshot from the last flush.
"""

from __future__ import annotations

import errno
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from pydantic import ValidationError

from harness.evaluation.result import program_sha256

from .atomic import (
    LockHeldError,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_parquet,
    atomic_write_text,
    fsync_dir,
    lock_file,
    makedirs_durable,
    unlock_file,
)
from .candidates import candidates_table, read_candidates_table, schema_version
from .records import SCHEMA_VERSION, CandidateRow, RunInfo, parse_journal

RUN_JSON = "run.json"
JOURNAL = "candidates.jsonl"
PARQUET = "candidates.parquet"
PROGRAMS = "programs"
CHECKPOINTS = "checkpoints"
LOCK = ".lock"

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+=@-]*$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_EXT = re.compile(r"^[A-Za-z0-9]{1,16}$")


class RunStoreError(RuntimeError):
    """A run directory is missing, corrupt, or used in a way that is not allowed."""


class RunLockedError(RunStoreError):
    """Another process (or another store in this process) is writing the run."""


def _overwrite_in_place(path: Path, data: bytes) -> None:
    """Rewrite an existing file in its own blocks (a full disk has no room for a temporary copy).

    Not atomic: a crash mid-write may tear the file; only used where the alternative is a stale
    status that claims the run is still going.

    Raises:
        OSError: If the write fails (e.g. the new text needs blocks the disk does not have).
    """
    fd = os.open(path, os.O_WRONLY)
    try:
        view = memoryview(data)
        off = 0
        while off < len(data):
            off += os.pwrite(fd, view[off:], off)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def _check_name(name: str, what: str) -> str:
    if not _SAFE_NAME.match(name) or name in (".", ".."):
        raise ValueError(f"invalid {what} {name!r}: use letters, digits and ._+=@- (no path separators)")
    return name


def program_paths(run_dir: Path) -> dict[str, str]:
    """Every program stored in a run directory: sha256 -> ``programs/<sha[:2]>/<sha>.<ext>`` (one scan).

    Args:
        run_dir: The run directory.

    Returns:
        The mapping (empty when nothing is stored).
    """
    out: dict[str, str] = {}
    try:
        shards = [d for d in os.scandir(Path(run_dir) / PROGRAMS) if d.is_dir()]
    except FileNotFoundError:
        return out
    for shard in sorted(shards, key=lambda d: d.name):
        for entry in sorted(os.scandir(shard.path), key=lambda e: e.name):
            sha = entry.name.split(".", 1)[0]  # hidden .tmp files of an interrupted write do not match
            if _SHA256.match(sha) and sha[:2] == shard.name:
                out.setdefault(sha, f"{PROGRAMS}/{shard.name}/{entry.name}")
    return out


class RunStore:
    """Reader and writer of one run directory (see the module docstring for the layout).

    A writable store holds an exclusive ``flock`` on ``.lock`` until :meth:`close`; use it as a
    context manager. Appends are serialised by an internal lock, so worker threads may share it.

    Attributes:
        run_dir: The run directory.
        journal_path: Path of ``candidates.jsonl``.
        parquet_path: Path of ``candidates.parquet``.
    """

    def __init__(self, run_dir: Path, info: RunInfo, lock_fd: int | None) -> None:
        """Wrap an already validated run directory; use :meth:`create` or :meth:`open` instead."""
        self.run_dir = run_dir
        self.journal_path = run_dir / JOURNAL
        self.parquet_path = run_dir / PARQUET
        self._info = info
        self._lock_fd = lock_fd
        self._mutex = threading.Lock()

    @staticmethod
    def _acquire(run_dir: Path) -> int:
        """Take the run's write lock and stamp our pid in it.

        Raises:
            RunLockedError: If another holder has it.
        """
        try:
            return lock_file(run_dir / LOCK, stamp=f"pid {os.getpid()}\n")
        except LockHeldError as e:
            raise RunLockedError(
                f"{run_dir} is being written by {e.holder}; wait for that run to end, or stop it "
                "(Ctrl-C or kill) and resume"
            ) from None

    @classmethod
    def create(cls, root: Path, info: RunInfo) -> RunStore:
        """Create ``root/<info.run_id>/`` and write its ``run.json``; the store is writable.

        Args:
            root: The results directory (created if needed).
            info: Header of the new run; ``info.run_id`` names the directory.

        Returns:
            The locked, writable store.

        Raises:
            ValueError: If the run id is not a safe directory name.
            RunStoreError: If the run directory already exists.
        """
        _check_name(info.run_id, "run id")
        root.mkdir(parents=True, exist_ok=True)
        run_dir = root / info.run_id
        try:
            run_dir.mkdir()
        except FileExistsError:
            raise RunStoreError(f"run directory {run_dir} already exists; choose another run id") from None
        fsync_dir(root)
        store = cls(run_dir, info, cls._acquire(run_dir))
        try:
            store.write_info(info)
            store.journal_path.touch(exist_ok=False)
            fsync_dir(run_dir)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def open(cls, run_dir: Path, *, readonly: bool = False) -> RunStore:
        """Open an existing run; a writable open locks it and cuts a torn last journal line.

        Args:
            run_dir: The run directory.
            readonly: Open without locking; every write then raises.

        Returns:
            The store.

        Raises:
            RunStoreError: If the directory or its ``run.json`` is missing or corrupt, or the
                journal is corrupt before its last line.
            RunLockedError: If writable and another process holds the lock.
        """
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise RunStoreError(f"{run_dir} is not a directory")
        lock_fd = None if readonly else cls._acquire(run_dir)
        try:
            try:
                info = RunInfo.model_validate_json((run_dir / RUN_JSON).read_bytes())
            except FileNotFoundError:
                raise RunStoreError(f"{run_dir} is not a run directory: {RUN_JSON} is missing") from None
            except ValidationError as e:
                raise RunStoreError(f"{run_dir / RUN_JSON} is corrupt or incompatible:\n{e}") from e
            store = cls(run_dir, info, lock_fd)
            if not readonly:
                store._repair_journal()
        except BaseException:
            if lock_fd is not None:
                unlock_file(lock_fd)
            raise
        return store

    @property
    def readonly(self) -> bool:
        """Whether this store was opened without the write lock."""
        return self._lock_fd is None

    def close(self) -> None:
        """Release the write lock (idempotent); the store is read-only afterwards."""
        if self._lock_fd is not None:
            fd, self._lock_fd = self._lock_fd, None
            unlock_file(fd, clear=True)

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _require_writable(self) -> None:
        if self._lock_fd is None:
            raise RunStoreError(f"{self.run_dir} is open read-only (or closed)")

    @property
    def info(self) -> RunInfo:
        """The run header as last written."""
        return self._info

    def write_info(self, info: RunInfo, *, durable_fallback: bool = False) -> None:
        """Atomically replace ``run.json`` (stamped with the current results schema version).

        Args:
            info: The new header; must keep the run id.
            durable_fallback: On a full disk (no room for the temporary copy), overwrite the file
                in place instead (used for a run's final status, which must not stay ``running``).

        Raises:
            ValueError: If ``info.run_id`` differs from this run's.
            RunStoreError: If the store is read-only.
            OSError: If the file cannot be written.
        """
        self._require_writable()
        if info.run_id != self._info.run_id:
            raise ValueError(f"run id {info.run_id!r} does not match {self._info.run_id!r}")
        if info.schema_version < SCHEMA_VERSION:  # this code writes the current layout
            info = info.model_copy(update={"schema_version": SCHEMA_VERSION})
        text = info.model_dump_json(indent=2) + "\n"
        try:
            atomic_write_text(self.run_dir / RUN_JSON, text)
        except OSError as e:
            if not (durable_fallback and e.errno in (errno.ENOSPC, errno.EDQUOT)):
                raise
            _overwrite_in_place(self.run_dir / RUN_JSON, text.encode("utf-8"))
        self._info = info

    def _read_journal(self) -> tuple[list[CandidateRow], int, int]:
        try:
            data = self.journal_path.read_bytes()
        except FileNotFoundError:
            return [], 0, 0
        try:
            rows, good = parse_journal(data)
        except ValueError as e:
            raise RunStoreError(f"{self.journal_path}: {e}") from e
        return rows, good, len(data)

    def _repair_journal(self) -> None:
        """Cut an unreadable tail (a line torn by a crash) off the journal."""
        _, good, size = self._read_journal()
        if good < size:
            with open(self.journal_path, "r+b") as f:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())

    def append(self, row: CandidateRow) -> None:
        """Durably append one evaluation to the journal (written, flushed and fsync'ed).

        Args:
            row: The evaluation; appending a row with an existing ``seq`` supersedes it.

        Raises:
            ValueError: If ``row.run_id`` is not this run's.
            RunStoreError: If the store is read-only.
            OSError: If the write or sync fails.
        """
        self._require_writable()
        if row.run_id != self._info.run_id:
            raise ValueError(f"row of run {row.run_id!r} appended to run {self._info.run_id!r}")
        line = (row.model_dump_json() + "\n").encode("utf-8")
        with self._mutex:
            fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            except OSError as e:
                e.filename = e.filename or str(self.journal_path)  # the user must know which disk
                raise
            finally:
                os.close(fd)

    def rows(self) -> list[CandidateRow]:
        """All journaled evaluations, one per ``seq`` (the last written wins), sorted by ``seq``.

        Returns:
            The rows; a torn last line is ignored.

        Raises:
            RunStoreError: If a journal line other than the last is corrupt.
        """
        with self._mutex:
            rows, _, _ = self._read_journal()
        by_seq = {r.seq: r for r in rows}
        return [by_seq[s] for s in sorted(by_seq)]

    def candidates_table(self) -> pa.Table:
        """The journal as a typed candidates table (what :meth:`flush_parquet` writes).

        Raises:
            RunStoreError: If the journal is corrupt.
        """
        return candidates_table(self._info, self.rows(), self.program_paths())

    def flush_parquet(self) -> int:
        """Atomically rewrite ``candidates.parquet`` from the journal, in the current schema.

        A run header of an older results schema is brought to the current version with it.

        Returns:
            The number of rows written.

        Raises:
            RunStoreError: If the store is read-only or the journal is corrupt.
            OSError: If writing fails; the previous parquet file is then intact.
        """
        self._require_writable()
        atomic_write_parquet(self.parquet_path, table := self.candidates_table())
        if self._info.schema_version < SCHEMA_VERSION:
            self.write_info(self._info.model_copy(update={"schema_version": SCHEMA_VERSION}))
        return table.num_rows

    def parquet_schema_version(self) -> int | None:
        """Schema version of ``candidates.parquet`` (None when there is none).

        Raises:
            pyarrow.ArrowInvalid: If the file's footer is unreadable.
        """
        import pyarrow.parquet as pq

        if not self.parquet_path.exists():
            return None
        return schema_version(pq.read_schema(self.parquet_path))

    def read_parquet(self) -> pd.DataFrame:
        """The last flushed parquet snapshot in the current schema (an empty, typed frame if never flushed).

        A snapshot of an older schema version is upgraded in memory (``bench repair`` rewrites it).

        Raises:
            pyarrow.ArrowInvalid: If the file is unreadable.
            ValueError: If the file is of a newer schema than this code reads.
        """
        if not self.parquet_path.exists():
            return candidates_table(self._info, [], {}).to_pandas()
        return read_candidates_table(self.parquet_path, self._info, self.program_paths()).to_pandas()

    def program_paths(self) -> dict[str, str]:
        """Every stored program: sha256 -> its path relative to the run directory (:func:`program_paths`)."""
        return program_paths(self.run_dir)

    def _program_dir(self, sha: str) -> Path:
        if not _SHA256.match(sha):
            raise ValueError(f"not a sha256 hex digest: {sha!r}")
        return self.run_dir / PROGRAMS / sha[:2]

    def put_program(self, source: str, ext: str = "txt") -> str:
        """Store a program under its content address (a no-op if already stored).

        Args:
            source: Program text.
            ext: File extension without the dot (``py``, ``cpp``, ...), for human browsing.

        Returns:
            The program's sha256 hex digest.

        Raises:
            ValueError: If ``ext`` is not 1-16 letters or digits.
            RunStoreError: If the store is read-only.
        """
        self._require_writable()
        ext = ext.removeprefix(".")
        if not _EXT.match(ext):
            raise ValueError(f"invalid program extension {ext!r}")
        sha = program_sha256(source)
        path = self._program_dir(sha) / f"{sha}.{ext}"
        if not path.exists():
            atomic_write_bytes(path, source.encode("utf-8"))
        return sha

    def program_path(self, sha: str) -> Path:
        """Path of a stored program.

        Raises:
            ValueError: If ``sha`` is not a sha256 hex digest.
            KeyError: If no program with that address is stored.
        """
        found = sorted(self._program_dir(sha).glob(f"{sha}.*"))
        if not found:
            raise KeyError(f"program {sha} is not stored in {self.run_dir}")
        return found[0]

    def get_program(self, sha: str) -> str:
        """Text of a stored program, verified against its address.

        Raises:
            ValueError: If ``sha`` is not a sha256 hex digest.
            KeyError: If no program with that address is stored.
            RunStoreError: If the stored text does not hash to ``sha`` (corruption).
        """
        source = (path := self.program_path(sha)).read_bytes().decode("utf-8")
        if program_sha256(source) != sha:
            raise RunStoreError(f"{path} does not match its content address")
        return source

    def checkpoint_path(self, name: str) -> Path:
        """Path of checkpoint ``name`` inside ``checkpoints/`` (created when the store is writable).

        Raises:
            ValueError: If ``name`` is not a plain file name.
        """
        directory = self.run_dir / CHECKPOINTS
        if not self.readonly:
            makedirs_durable(directory)
        return directory / _check_name(name, "checkpoint name")

    def save_checkpoint(self, name: str, obj: Any) -> Path:
        """Atomically write a JSON checkpoint.

        Args:
            name: Plain file name, e.g. ``agent.json``.
            obj: JSON-serialisable state.

        Returns:
            The checkpoint's path.

        Raises:
            ValueError: If ``name`` is invalid or ``obj`` contains NaN / infinities.
            TypeError: If ``obj`` is not JSON-serialisable.
            RunStoreError: If the store is read-only.
        """
        self._require_writable()
        atomic_write_json(path := self.checkpoint_path(name), obj)
        return path

    def load_checkpoint(self, name: str) -> Any:
        """Read a JSON checkpoint.

        Returns:
            The decoded state, or None when no such checkpoint exists.

        Raises:
            ValueError: If ``name`` is invalid.
            RunStoreError: If the checkpoint is not valid JSON.
        """
        path = self.checkpoint_path(name)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except json.JSONDecodeError as e:
            raise RunStoreError(f"checkpoint {path} is corrupt: {e}") from e
