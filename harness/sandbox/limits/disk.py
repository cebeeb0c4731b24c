"""A candidate's disk quota: every location it can write is a size-limited tmpfs.

Inside bubblewrap, ``/tmp``, ``/dev/shm`` and an empty ``/sandbox`` are bwrap tmpfs mounts sized
with ``--size`` (see ``isolation.bwrap_prefix``). The candidate's work directory (a host directory
bound at ``/sandbox``, through which the trusted scorer exchanges files with it) becomes a sized
tmpfs mounted on the host when the harness may mount (root with ``CAP_SYS_ADMIN``):
:class:`WorkdirQuota`. Where it may not (a container without ``CAP_SYS_ADMIN``), the container's
own tmpfs mounts are sized by the backend (``docker_backend``); without root and without a
container the work directory has no quota, and a warning says so.

tmpfs is memory, not disk: its pages are charged to the memory cgroup of the process that wrote
them, so what a candidate writes also counts towards its memory limit. A write past the quota fails
with ``ENOSPC`` ("No space left on device"); :func:`quota_reason` is the phrase every such error
carries.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from functools import cache
from pathlib import Path

from harness.scoring.api import disk_quota_reason as quota_reason

__all__ = ["ENOSPC_TEXT", "WorkdirQuota", "hit_quota", "quota_reason"]
log = logging.getLogger(__name__)

MIB = 1024 * 1024
ENOSPC_TEXT = b"No space left on device"
"""What ``strerror(ENOSPC)`` prints: a command's stderr holding it hit a quota."""
FULL_BELOW_BYTES = 64 * 1024
"""A quota tmpfs with less than this free is full (tmpfs allocates in pages)."""
_MNT_DETACH = 2


@cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


@cache
def _warn_unbounded(why: str) -> None:
    log.warning("sandbox: the candidate's work directory has no disk quota (%s)", why)


class WorkdirQuota:
    """A size-limited tmpfs mounted on a candidate's work directory, when this process may mount.

    The directory keeps its path, so the trusted scorer and the sandbox see the same files as
    before; only its size is bounded. :meth:`close` detaches the mount (lazily: a process still
    inside cannot keep it busy).
    """

    def __init__(self, path: Path, disk_mb: int, *, mode: int = 0o777) -> None:
        """Mount a ``disk_mb`` MiB tmpfs on ``path`` (an empty directory) if permitted.

        Args:
            path: The work directory (must exist and be empty).
            disk_mb: Size of the tmpfs, MiB.
            mode: Permissions of the tmpfs root.
        """
        self.path = Path(path)
        self.disk_mb = disk_mb
        self.mounted = False
        if os.geteuid() != 0:
            _warn_unbounded("mounting a tmpfs needs root")
            return
        opts = f"size={disk_mb * MIB},mode={mode:o},nr_inodes={max(1024, disk_mb * 256)}"
        nosuid_nodev = 0x2 | 0x4
        rc = _libc().mount(b"tmpfs", os.fsencode(self.path), b"tmpfs", nosuid_nodev, opts.encode())
        if rc != 0:
            err = ctypes.get_errno()
            # In a container the backend sized its tmpfs mounts instead: no warning there.
            if os.environ.get("EVOBENCH_ISOLATION") != "container":
                _warn_unbounded(f"mount failed: {os.strerror(err)}")
            return
        self.mounted = True

    def full(self) -> bool:
        """Whether the quota is (nearly) used up: a write of the candidate's may have failed on it."""
        if not self.mounted:
            return False
        try:
            st = os.statvfs(self.path)
        except OSError:
            return False
        return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES or (st.f_files > 0 and st.f_favail == 0)

    def close(self) -> None:
        """Detach the tmpfs (its content is freed once nothing holds it); idempotent."""
        if self.mounted:
            self.mounted = False
            if _libc().umount2(os.fsencode(self.path), _MNT_DETACH) != 0:
                log.warning("could not unmount %s: %s", self.path, os.strerror(ctypes.get_errno()))


def hit_quota(stderr: bytes, returncode: int | None) -> bool:
    """Whether a failed command's stderr says a write ran out of space (the quota's tmpfs is full).

    The text is the candidate's own, so it is trusted only to fail the candidate: a run that ended
    normally is never reclassified by it.
    """
    return returncode not in (0, None) and ENOSPC_TEXT in stderr
