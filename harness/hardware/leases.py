"""Machine-wide leases: an exclusive ``flock`` on a file per resource (a CPU, a block of uids).

A lease is held by an open descriptor; the kernel drops it when the holder closes it or dies,
whatever killed it. The files are opened read-only, so a process of another user can lease a file
that root created, and every user's processes see one another's leases.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path


def lease_dir(path: Path) -> bool:
    """Make the shared lock directory (sticky, writable by all); False where it cannot be made."""
    try:
        path.mkdir(mode=0o1777, exist_ok=True)
    except OSError:
        return False
    return True


def try_lease(path: Path) -> int | None:
    """Take ``path``'s exclusive lock without waiting.

    Returns:
        The descriptor holding it (close it to release), or None where another holder has it or
        the file cannot be opened.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
