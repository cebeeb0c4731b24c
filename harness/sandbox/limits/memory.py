"""Which mechanism limits a candidate's memory here, and the per-candidate handle on it.

Limits measure memory a candidate uses, never address space it only reserves: CUDA builds of
torch map many GiB of virtual address space at import, so ``RLIMIT_AS`` breaks ``import torch``.

* ``cgroup-v2`` / ``cgroup-v1``: a fresh cgroup per candidate process tree (see :mod:`.cgroups`);
  the kernel OOM-kills the tree at the limit and the kill is reported as a memory error.
* ``rlimit-data``: where no cgroup can be made (inside a container, unprivileged without a
  delegated subtree), ``RLIMIT_DATA`` caps private writable memory of each process; file-backed
  mappings and ``PROT_NONE`` reservations do not count. Python then raises ``MemoryError``.

In both cases the limit is what the candidate may use *on top of* the sandbox's start-up state
(interpreter plus pre-imported modules): a warm child's cgroup does not carry the zygote's pages
(they stay charged to the zygote), and a cold process's limit is set after its pre-imports.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from .cgroups import POOL, CandidateCgroup, CgroupError, Hierarchy, detect_hierarchy, sweep_stale

Kind = Literal["cgroup-v2", "cgroup-v1", "rlimit-data"]
MIB = 1024 * 1024
STARTUP_ALLOWANCE_MB = 4096
"""Cold start: headroom for the trusted pre-imports, before the limit is tightened to the candidate's."""


@dataclass(frozen=True)
class MemoryMechanism:
    """How candidate memory is limited in this process."""

    kind: Kind
    """The mechanism in force."""
    hierarchy: Hierarchy | None
    """Where cgroups are made (cgroup kinds only)."""
    reasons: tuple[str, ...] = field(default_factory=tuple)
    """Why stronger mechanisms are not used (empty when a cgroup is used)."""

    def describe(self) -> str:
        """One line for logs, ``bench doctor`` and error messages."""
        if self.hierarchy is not None:
            extra = ", pids" if self.hierarchy.pids else ", no pids controller"
            if self.hierarchy.version == 1:
                extra += ", swap accounted" if self.hierarchy.memsw else ", swap not accounted"
            return f"{self.kind} under {self.hierarchy.memory_parent}{extra}"
        return f"{self.kind} (private writable memory per process)"


@cache
def detect_memory_mechanism() -> MemoryMechanism:
    """Probe once per process. ``EVOBENCH_MEMORY_LIMIT=rlimit`` forces the fallback."""
    reasons: list[str] = []
    if os.environ.get("EVOBENCH_MEMORY_LIMIT", "").lower() == "rlimit":
        return MemoryMechanism("rlimit-data", None, ("EVOBENCH_MEMORY_LIMIT=rlimit",))
    hier = detect_hierarchy(reasons)
    if hier is None:
        return MemoryMechanism("rlimit-data", None, tuple(reasons))
    return MemoryMechanism("cgroup-v2" if hier.version == 2 else "cgroup-v1", hier)


def sweep_orphaned_cgroups() -> int:
    """Remove candidate cgroups whose owning (worker) process is gone; returns how many.

    Called after worker processes are killed (Ctrl-C, a broken pool): their candidates' groups
    would otherwise stay until the next harness start.
    """
    hier = detect_memory_mechanism().hierarchy
    if hier is None:
        return 0
    return sum(sweep_stale(p) for p in (hier.memory_parent, hier.pids_parent) if p is not None)


def data_rlimit(memory_mb: int) -> dict[str, int]:
    """``RLIMIT_DATA`` for a fresh process (fallback mechanism only; empty under cgroups)."""
    if detect_memory_mechanism().kind != "rlimit-data":
        return {}
    return {"RLIMIT_DATA": memory_mb * MIB}


def data_size_bytes() -> int:
    """This process's private writable memory (``VmData``), what ``RLIMIT_DATA`` is checked against."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


class CandidateMemory:
    """The memory limit of one candidate process tree (or of one ``run`` command)."""

    def __init__(self, memory_mb: int, pids: int | None, *, startup: bool = False) -> None:
        """Create the candidate's cgroup when cgroups are available.

        Args:
            memory_mb: What the candidate may use.
            pids: Process limit for the tree (cgroup pids controller), if any.
            startup: The process still has trusted start-up work to do (pre-imports): allow
                :data:`STARTUP_ALLOWANCE_MB` more until :meth:`started` tightens the limit.

        Raises:
            CgroupError: If cgroups are in use here but this one cannot be set up.
        """
        self.memory_mb = memory_mb
        self.mechanism = detect_memory_mechanism()
        self.cgroup: CandidateCgroup | None = None
        self._released = False
        if self.mechanism.hierarchy is not None:
            extra = STARTUP_ALLOWANCE_MB if startup else 0
            self.cgroup = POOL.acquire(self.mechanism.hierarchy, (memory_mb + extra) * MIB, pids)

    @property
    def data_limit_bytes(self) -> int | None:
        """``RLIMIT_DATA`` headroom above the start-up state (fallback only)."""
        return self.memory_mb * MIB if self.cgroup is None else None

    def join(self) -> None:
        """Put the calling process into the group (for ``preexec_fn``, before ``exec``)."""
        if self.cgroup is not None:
            self.cgroup.attach(os.getpid())

    def attach(self, pid: int) -> None:
        """Put process ``pid`` (host pid) into the group.

        Raises:
            CgroupError: If the kernel refuses.
        """
        if self.cgroup is not None:
            self.cgroup.attach(pid)

    def started(self) -> None:
        """The trusted start-up is over: the candidate gets ``memory_mb`` on top of what is in use.

        Raises:
            CgroupError: If the new limit cannot be set.
        """
        if self.cgroup is not None:
            try:
                self.cgroup.set_memory(self.cgroup.usage_bytes() + self.memory_mb * MIB)
            except OSError as e:
                raise CgroupError(f"could not set the memory limit: {e}") from e

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of the tree for exceeding the limit."""
        return self.cgroup is not None and self.cgroup.oom_kills() > self.cgroup.host_oom_kills()

    def host_oom_killed(self) -> bool:
        """Whether the machine-wide OOM killer (not the candidate's limit) killed a process of the tree."""
        return self.cgroup is not None and self.cgroup.host_oom_kills() > 0

    def label(self) -> str:
        """``memory limit N MiB (mechanism)``, the phrase every memory error carries."""
        return f"memory limit {self.memory_mb} MiB ({self.mechanism.kind})"

    def close(self) -> None:
        """Kill what is left of the tree and give the group back for reuse; idempotent."""
        if self.cgroup is not None and not self._released:
            self._released = True
            POOL.release(self.cgroup)


__all__ = [
    "CandidateMemory",
    "CgroupError",
    "MemoryMechanism",
    "data_rlimit",
    "data_size_bytes",
    "detect_memory_mechanism",
    "sweep_orphaned_cgroups",
]
