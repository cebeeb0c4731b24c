"""An append-only JSONL journal of flat records with a Parquet snapshot, for agent-owned run files.

It follows the pattern of the run store's candidate journal (``harness/results/store.py``):
each record is one JSON line, written with a single ``write`` and ``fsync``'ed, so a killed
process loses at most the line being written; a torn last line is ignored when reading and cut
off when the journal is reopened; the Parquet file is rewritten atomically from the journal by
:meth:`RecordJournal.flush`. Without a directory the journal keeps its records in memory only
(unit tests, agents run outside the runner).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

from harness.results.atomic import atomic_write_parquet, makedirs_durable

R = TypeVar("R", bound=BaseModel)


def _parse(data: bytes, model: type[R]) -> tuple[list[R], int]:
    """Rows of a journal and the byte length of its intact prefix (a torn tail is dropped)."""
    rows: list[R] = []
    good = 0
    pos = 0
    for line in data.split(b"\n")[:-1]:  # the part after the last newline is torn or empty
        end = pos + len(line) + 1
        if line.strip():
            try:
                rows.append(model.model_validate_json(line))
            except (ValidationError, ValueError):
                break  # a garbled line: keep the prefix before it
        pos = good = end
    return rows, good


class RecordJournal(Generic[R]):
    """``<stem>.jsonl`` (append-only, durable) plus ``<stem>.parquet`` (snapshot) in one directory.

    Appends are serialised by a lock, so threads may share a journal.

    Attributes:
        jsonl_path: The journal file, or None when in memory only.
        parquet_path: The snapshot file, or None when in memory only.
    """

    def __init__(
        self,
        directory: Path | None,
        stem: str,
        model: type[R],
        key: Callable[[R], Hashable] | None = None,
    ) -> None:
        """Open (and repair) the journal in ``directory``, or keep records in memory when None.

        Args:
            directory: Where the files live (created if needed), or None.
            stem: File name without extension, e.g. ``llm_calls``.
            model: The flat pydantic record type (scalar, optional, enum or literal fields).
            key: When given, a record supersedes earlier ones with the same key in :meth:`rows`
                and the snapshot (e.g. a step redone after a resume).

        Raises:
            OSError: If the directory cannot be created or the journal cannot be repaired.
        """
        self.model = model
        self.key = key
        self._lock = threading.Lock()
        self._memory: list[R] = []
        self.jsonl_path: Path | None = None
        self.parquet_path: Path | None = None
        if directory is not None:
            makedirs_durable(directory)
            self.jsonl_path = directory / f"{stem}.jsonl"
            self.parquet_path = directory / f"{stem}.parquet"
            self._repair()

    def _repair(self) -> None:
        assert self.jsonl_path is not None
        try:
            data = self.jsonl_path.read_bytes()
        except FileNotFoundError:
            return
        _, good = _parse(data, self.model)
        if good < len(data):
            with open(self.jsonl_path, "r+b") as f:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())

    def append(self, row: R) -> None:
        """Durably append one record.

        Args:
            row: The record.

        Raises:
            TypeError: If ``row`` is not an instance of the journal's model.
            OSError: If writing or syncing fails.
        """
        if not isinstance(row, self.model):
            raise TypeError(f"expected {self.model.__name__}, got {type(row).__name__}")
        with self._lock:
            if self.jsonl_path is None:
                self._memory.append(row)
                return
            line = (row.model_dump_json() + "\n").encode("utf-8")
            fd = os.open(self.jsonl_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(line)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)

    def rows(self) -> list[R]:
        """All records in the order written (a torn last line is ignored).

        With a ``key``, only the last record of each key is kept, at the position of the first.

        Raises:
            OSError: If the journal cannot be read.
        """
        with self._lock:
            if self.jsonl_path is None:
                rows = list(self._memory)
            else:
                try:
                    rows = _parse(self.jsonl_path.read_bytes(), self.model)[0]
                except FileNotFoundError:
                    rows = []
        if self.key is None:
            return rows
        latest: dict[Hashable, R] = {}
        for r in rows:
            latest[self.key(r)] = r
        return list(latest.values())

    def flush(self) -> int:
        """Atomically rewrite the Parquet snapshot from the journal (no-op in memory).

        Returns:
            The number of records.

        Raises:
            OSError: If writing fails; the previous snapshot is then intact.
        """
        rows = self.rows()
        if self.parquet_path is not None:
            # pyarrow only here: importing an agent (``bench agents``) should not pay for it.
            from harness.results.records import records_to_table

            atomic_write_parquet(self.parquet_path, records_to_table(rows, self.model))
        return len(rows)
