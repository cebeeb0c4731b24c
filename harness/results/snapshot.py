"""Install a copy of a run directory made elsewhere (a Modal run container) atomically.

A snapshot arrives as a gzipped tar of a results directory holding one run directory. It is
unpacked into a hidden staging folder beside the destination (``results/.sync-<id>/``; two
levels deep, so nothing globbing ``results/*/run.json`` ever sees it), checked (its
``run.json`` parses and names the run), and then swapped with the local copy in one
``renameat2(RENAME_EXCHANGE)``: a reader sees the old run directory or the new one, never a
mixture and never none. Where the kernel or file system lacks the exchange, two renames are
used and :func:`recover` puts the old copy back if the process died between them.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import io
import json
import os
import shutil
import tarfile
import uuid
from pathlib import Path

from .atomic import atomic_write_json, fsync_dir
from .records import RunInfo

STAGING_PREFIX = ".sync-"
_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


class SnapshotError(RuntimeError):
    """A snapshot that cannot be installed (damaged, or not one run directory)."""


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically; False where ``renameat2`` or the exchange is unavailable."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError, TypeError):
        return False
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def recover(results_dir: Path) -> None:
    """Finish or undo swaps a killed process left behind, and remove stale staging folders."""
    if not results_dir.is_dir():
        return
    for staging in results_dir.glob(f"{STAGING_PREFIX}*"):
        _drop(staging, results_dir)
    fsync_dir(results_dir)


def _drop(staging: Path, results_dir: Path) -> None:
    """Remove a staging folder, first putting back an old copy a failed swap left in it."""
    old = staging / "old"
    for kept in old.iterdir() if old.is_dir() else ():
        if not (results_dir / kept.name).exists():
            os.rename(kept, results_dir / kept.name)
    shutil.rmtree(staging, ignore_errors=True)


def install(
    tar_gz: bytes, results_dir: Path, extra: dict[str, dict[str, object]] | None = None
) -> str | None:
    """Unpack a snapshot of a results directory and swap its run directory in.

    Args:
        tar_gz: A gzipped tar of a results directory (empty: nothing to install yet).
        results_dir: The local results directory.
        extra: JSON files to write into the run directory before the swap (name -> object).

    Returns:
        The run id installed, or None when the snapshot holds no run directory yet.

    Raises:
        SnapshotError: If the archive is damaged, holds unsafe paths, several runs, or a run
            directory without a valid ``run.json``.
    """
    if not tar_gz:
        return None
    results_dir.mkdir(parents=True, exist_ok=True)
    staging = results_dir / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
    staging.mkdir()
    try:
        unpacked = staging / "new"
        try:
            with tarfile.open(fileobj=io.BytesIO(tar_gz), mode="r:gz") as tar:
                # "data": no absolute paths, no links or members leaving the folder, no devices.
                tar.extractall(unpacked, filter="data")
        except (tarfile.TarError, OSError, EOFError) as e:
            raise SnapshotError(f"damaged run snapshot: {e}") from e
        runs = (
            [p for p in unpacked.iterdir() if p.is_dir() and not p.name.startswith(".")]
            if unpacked.is_dir()
            else []
        )
        if not runs:
            return None
        if len(runs) > 1:
            raise SnapshotError(
                f"the snapshot holds {len(runs)} runs, expected one: {sorted(p.name for p in runs)}"
            )
        run = runs[0]
        try:
            info = RunInfo.model_validate(json.loads((run / "run.json").read_text(encoding="utf-8")))
        except (OSError, ValueError) as e:
            raise SnapshotError(f"the snapshot's run {run.name} has no valid run.json: {e}") from e
        if info.run_id != run.name:
            raise SnapshotError(f"run.json names run {info.run_id!r}, its directory is {run.name!r}")
        for name, obj in (extra or {}).items():
            atomic_write_json(run / name, obj)
        _swap(run, results_dir / run.name, staging)
        return run.name
    finally:
        _drop(staging, results_dir)  # after a hard kill, recover() does this


def _swap(new: Path, target: Path, staging: Path) -> None:
    if not target.exists():
        os.rename(new, target)
    elif not _exchange(new, target):
        (staging / "old").mkdir()
        os.rename(target, staging / "old" / target.name)  # recover() undoes this if we die here
        os.rename(new, target)
    fsync_dir(target.parent)


def pack(run_dir: Path, leave_out: tuple[str, ...] = ()) -> bytes:
    """A gzipped tar of ``run_dir`` as one member folder (what :func:`install` and the container take).

    Args:
        run_dir: The run directory.
        leave_out: Top-level file names not packed (besides the write lock ``.lock``).

    Raises:
        OSError: If the run directory cannot be read.
    """
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        skip = {f"{run_dir.name}/{n}" for n in (".lock", *leave_out)}
        tar.add(run_dir, arcname=run_dir.name, filter=lambda m: None if m.name in skip else m)
    return buf.getvalue()
