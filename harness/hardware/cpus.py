"""The CPU a process's CPU-clocked work is pinned to: one per worker, leased machine-wide.

The kernel families' OS clock pins a session's sandbox, echo and speed probe to one CPU
(``harness.kernels.timing.one_cpu``). A backend's workers evaluate side by side, and so may two
backends of two processes (two ``bench run`` on one machine, parallel test processes): while a
session is open its process leases a CPU with an exclusive ``flock`` on a file per CPU (the kernel
drops a dead process's lock), so two evaluations are not stacked on one CPU while another idles.
The lease starts at the worker index's CPU (else the last one) and takes the first CPU no other
process holds; when every CPU is held it shares the preferred one, as without leases.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .leases import lease_dir, try_lease

LOCK_DIR = Path("/tmp/evobench-cpu-leases")
"""Where the per-CPU lock files live: one fixed place for every process on the machine."""

_worker_index: list[int] = []
_lease: dict[str, int] = {}  # "cpu" and "fd" of the CPU this process holds, "users" counting holders
_guard = threading.Lock()


def set_worker_index(index: int) -> None:
    """Record this process's worker index within its backend (set by the worker initializer)."""
    _worker_index[:] = [index]


def _choose() -> tuple[int, int | None] | None:
    """(CPU, fd of its lease or None where shared) from the preferred CPU on; None: no affinity."""
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if not mine:
        return None
    start = (_worker_index[0] if _worker_index else len(mine) - 1) % len(mine)
    if not lease_dir(LOCK_DIR):
        return mine[start], None  # no lock can be taken (a read-only /tmp): the preferred CPU, shared
    for k in range(len(mine)):
        cpu = mine[(start + k) % len(mine)]
        fd = try_lease(LOCK_DIR / f"cpu{cpu}.lock")
        if fd is not None:
            return cpu, fd
    return mine[start], None  # every CPU is leased by another process: share the preferred one


def hold_home_cpu() -> tuple[int, ...] | None:
    """Lease this process's one CPU (see the module) until a matching :func:`let_go_home_cpu`.

    Holds nest: every session open in this process shares the CPU the first one leased, so the
    sessions of one evaluation are timed on one CPU. None where affinity is unsupported.
    """
    with _guard:
        if "cpu" not in _lease:
            got = _choose()
            if got is None:
                return None
            _lease["cpu"] = got[0]
            if got[1] is not None:
                _lease["fd"] = got[1]
        _lease["users"] = _lease.get("users", 0) + 1
        return (_lease["cpu"],)


def let_go_home_cpu() -> None:
    """End one :func:`hold_home_cpu`; the last one gives the lease back."""
    with _guard:
        _lease["users"] = _lease.get("users", 0) - 1
        if _lease["users"] <= 0:
            fd = _lease.get("fd")
            _lease.clear()
            if fd is not None:
                os.close(fd)


def home_cpu() -> tuple[int, ...] | None:
    """The CPU this process holds, else the one a lease would take now (nothing is kept held).

    None where affinity is unsupported.
    """
    got = hold_home_cpu()
    let_go_home_cpu()
    return got
