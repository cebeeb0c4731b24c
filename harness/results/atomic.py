"""Crash-safe file writes (a reader sees the old file or the new one, never half of either) and locks.

Every writer here follows the same protocol: write to a temporary file in the destination's
directory, flush and ``fsync`` it, ``os.replace`` it over the destination (atomic on POSIX
within one file system), then ``fsync`` the directory so the rename itself is durable. If the
writer is killed or raises at any point before the rename, the destination is untouched and
the temporary file is removed (or, after a hard kill, left behind as a hidden ``.*.tmp`` file).

Writers that read-modify-write a shared file serialise on an exclusive ``flock`` taken with
:func:`lock_file`; the kernel releases it when the holder exits or dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

StrPath = str | os.PathLike[str]
"""Anything accepted as a file system path."""


def _current_umask() -> int:
    """Return the process umask without leaving it changed (read once, at import)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def fsync_dir(directory: StrPath) -> None:
    """Flush a directory's entries (new names, renames) to stable storage.

    File systems that cannot ``fsync`` a directory are tolerated silently.

    Args:
        directory: The directory to flush.
    """
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(directory: StrPath) -> None:
    """Create ``directory`` and missing ancestors, syncing each parent that gains an entry.

    Args:
        directory: The directory to create (existing directories are fine).

    Raises:
        OSError: If a directory cannot be created.
    """
    path = Path(directory)
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    for d in reversed(missing):
        d.mkdir(exist_ok=True)
        fsync_dir(d.parent)


def _target_mode(path: Path) -> int:
    """Permission bits for the new file: the old file's, else ``0o666`` minus the umask."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return 0o666 & ~_UMASK


@contextlib.contextmanager
def atomic_file(path: StrPath) -> Iterator[IO[bytes]]:
    """Open a temporary binary file that replaces ``path`` when the block exits cleanly.

    The parent directory is created if needed. If the block raises (or the process dies),
    ``path`` keeps its previous content and the temporary file is removed.

    Args:
        path: Destination file.

    Yields:
        A writable binary file object positioned at offset 0.

    Raises:
        OSError: If the temporary file cannot be created, synced or renamed.
    """
    target = Path(path)
    parent = target.parent
    makedirs_durable(parent)
    mode = _target_mode(target)
    fd, tmp_name = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(tmp_name, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        if isinstance(e, OSError) and e.errno is not None and e.filename is None:
            e.filename = str(target)  # a full disk fails the write, which names no file
        raise
    fsync_dir(parent)


def atomic_write_bytes(path: StrPath, data: bytes) -> None:
    """Atomically replace ``path`` with ``data``.

    Args:
        path: Destination file (its directory is created if needed).
        data: The complete new content.

    Raises:
        OSError: If writing, syncing or renaming fails; ``path`` is then unchanged.
    """
    with atomic_file(path) as f:
        f.write(data)


def atomic_write_text(path: StrPath, text: str, encoding: str = "utf-8") -> None:
    """Atomically replace ``path`` with ``text``.

    Args:
        path: Destination file.
        text: The complete new content.
        encoding: Text encoding.

    Raises:
        OSError: If writing, syncing or renaming fails; ``path`` is then unchanged.
        UnicodeEncodeError: If ``text`` cannot be encoded; ``path`` is then unchanged.
    """
    atomic_write_bytes(path, text.encode(encoding))


def atomic_write_json(path: StrPath, obj: Any, *, indent: int | None = 2, sort_keys: bool = False) -> None:
    """Atomically replace ``path`` with the JSON encoding of ``obj`` (plus a final newline).

    The object is fully encoded before the destination is touched, so an unserialisable
    value never leaves a partial file.

    Args:
        path: Destination file.
        obj: A JSON-serialisable value (NaN and infinities are rejected).
        indent: Indentation passed to :func:`json.dumps`; None for one line.
        sort_keys: Whether to sort object keys.

    Raises:
        TypeError: If ``obj`` is not JSON-serialisable.
        ValueError: If ``obj`` contains NaN or an infinity.
        OSError: If writing, syncing or renaming fails; ``path`` is then unchanged.
    """
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys, allow_nan=False, ensure_ascii=False)
    atomic_write_text(path, text + "\n")


def atomic_write_parquet(path: StrPath, data: pd.DataFrame | pa.Table) -> None:
    """Atomically replace ``path`` with a Parquet file holding ``data``.

    Args:
        path: Destination file.
        data: A pandas DataFrame (its index is dropped) or a pyarrow Table.

    Raises:
        TypeError: If ``data`` is neither a DataFrame nor a Table.
        pyarrow.ArrowException: If the data cannot be converted or encoded.
        OSError: If writing, syncing or renaming fails; ``path`` is then unchanged.
    """
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(data, pd.DataFrame):
        table = pa.Table.from_pandas(data, preserve_index=False)
    elif isinstance(data, pa.Table):
        table = data
    else:
        raise TypeError(f"expected a pandas DataFrame or a pyarrow Table, got {type(data).__name__}")
    with atomic_file(path) as f:
        pq.write_table(table, f)


def lock_holders(path: StrPath) -> list[int]:
    """Pids that hold a ``flock`` on ``path``, from ``/proc/locks`` (empty when unknown).

    The stamp a holder writes into a lock file outlives it; the kernel's table names the process
    that holds the lock now (e.g. a ``flock`` command that never stamps).
    """
    try:
        st = os.stat(path)
        table = Path("/proc/locks").read_text()
    except OSError:
        return []
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    pids: list[int] = []
    for line in table.splitlines():
        f = line.split()
        if "->" in f:  # a waiter, not a holder
            continue
        if len(f) >= 6 and f[1] == "FLOCK" and f[5] == dev and f[4].isdigit():
            pids.append(int(f[4]))
    return pids


def describe_holder(path: StrPath, stamp: str = "") -> str:
    """Who holds the lock on ``path``: live pids with their commands, and whether ``stamp`` is stale."""
    parts = []
    holders = lock_holders(path)
    for pid in holders:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            cmd = ""
        parts.append(f"pid {pid}" + (f" ({cmd.strip()[:120]})" if cmd.strip() else ""))
    if not parts:
        return stamp or "another holder"
    text = ", ".join(parts)
    named = stamp.split()[-1] if stamp else ""
    if named.isdigit() and int(named) not in holders:  # the stamp of an earlier holder
        state = "not the holder" if Path(f"/proc/{named}").exists() else "no longer running"
        text += f" (the lock file's stamp names {stamp}, {state})"
    return text


class LockHeldError(TimeoutError):
    """Another holder kept a lock file's ``flock`` for longer than the caller would wait."""

    def __init__(self, path: StrPath, holder: str) -> None:
        """Record the lock path and the holder's stamp (empty when unknown)."""
        super().__init__(f"{path} is locked by {holder or 'another holder'}")
        self.path = Path(path)
        self.holder = holder


def lock_file(path: StrPath, *, timeout: float = 0.0, stamp: str = "") -> int:
    """Open ``path`` (created if needed) and take an exclusive ``flock`` on it.

    Locks belong to the open file description, so two opens in one process also exclude each other.

    Args:
        path: The lock file.
        timeout: Seconds to wait for another holder; 0 gives up at once.
        stamp: Text written into the file once locked (e.g. our pid), shown to waiters that give up.

    Returns:
        The locked descriptor; pass it to :func:`unlock_file` to release the lock.

    Raises:
        LockHeldError: If another holder keeps the lock past ``timeout``.
        OSError: If the file cannot be opened.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    stamp = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
                    raise LockHeldError(path, describe_holder(path, stamp)) from None
                time.sleep(0.02)
        if stamp:
            os.ftruncate(fd, 0)
            os.pwrite(fd, stamp.encode("utf-8"), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def unlock_file(fd: int, *, clear: bool = False) -> None:
    """Release a lock taken by :func:`lock_file` by closing its descriptor.

    Args:
        fd: The descriptor returned by :func:`lock_file`.
        clear: Whether to empty the file (remove the stamp) first.

    Raises:
        OSError: If the descriptor is not open.
    """
    if clear:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
    os.close(fd)
