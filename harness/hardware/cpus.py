"""The CPU a process's CPU-clocked work is pinned to: one per worker of a backend.

The kernel families' OS clock pins a session's sandbox, echo and speed probe to one CPU
(``harness.kernels.timing.one_cpu``). A backend's workers evaluate side by side; each pins to the
CPU of its own index, so two evaluations are not stacked on one CPU while another idles.
"""

from __future__ import annotations

import os

_worker_index: list[int] = []


def set_worker_index(index: int) -> None:
    """Record this process's worker index within its backend (set by the worker initializer)."""
    _worker_index[:] = [index]


def home_cpu() -> tuple[int, ...] | None:
    """One CPU of this process's affinity: the worker index's (modulo), else the last one.

    None where affinity is unsupported.
    """
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None
    if not mine:
        return None
    i = _worker_index[0] if _worker_index else len(mine) - 1
    return (mine[i % len(mine)],)
