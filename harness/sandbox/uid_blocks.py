"""Blocks of sandbox uids, leased machine-wide so that two backends never share one.

Each local backend runs its candidates as uids of a block of its own: the per-uid process limit
and the kill of a uid's processes after every run (``kill_candidate_uid``) must never reach
another backend's candidates (a second ``bench run``, a parallel test process). A block is held
by an exclusive ``flock`` on a file per block, released by :meth:`UidBlock.release` or when the
holding process dies, whatever killed it.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.hardware.leases import lease_dir, try_lease

from .isolation import UIDS_PER_BACKEND

UID_BLOCKS = 250
"""Blocks available: 61000 + 250 * 16 stays below 65534 (nobody)."""
LOCK_DIR = Path("/tmp/evobench-uid-blocks")
"""Where the lock files live: one fixed place for every process on the machine."""


class UidBlock:
    """One leased block of ``UIDS_PER_BACKEND`` sandbox uids."""

    def __init__(self, index: int, fd: int | None) -> None:
        self.index = index
        """The block's number (0 .. ``UID_BLOCKS - 1``)."""
        self._fd = fd

    @property
    def offset(self) -> int:
        """First uid offset of the block (add ``UNPRIVILEGED_UID_BASE`` for the uid)."""
        return self.index * UIDS_PER_BACKEND

    @classmethod
    def lease(cls, hint: int, lock_dir: Path = LOCK_DIR) -> UidBlock:
        """Hold the first free block from ``hint`` on (wrapping around).

        Where no lock can be taken at all (a read-only ``/tmp``), the ``hint`` block is used
        unleased, as before leases existed.

        Raises:
            RuntimeError: Every block is held by a live process.
        """
        if not lease_dir(lock_dir):
            return cls(hint % UID_BLOCKS, None)
        for k in range(UID_BLOCKS):
            index = (hint + k) % UID_BLOCKS
            fd = try_lease(lock_dir / f"{index}.lock")
            if fd is not None:
                return cls(index, fd)
        raise RuntimeError(f"all {UID_BLOCKS} sandbox uid blocks are in use by live backends")

    def release(self) -> None:
        """Give the block back (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        self.release()  # a backend dropped without close() gives its block back with it
