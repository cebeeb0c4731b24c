"""CPU time (user + sys) of this process and every descendant, for benchmarks on a shared machine.

Wall-clock ratios are noisy when other work shares the cores; CPU seconds per evaluation are not.
Where possible this process moves itself into a fresh cgroup (v1 ``cpuacct`` or a v2 child group),
so the counter includes sandboxed grandchildren that are reaped by someone else (bwrap's init, a
zygote). Otherwise it falls back to ``getrusage`` of this process and its waited-for children,
which misses work that is still running or was never waited for (the label says so).

Docker containers run outside this process tree: :class:`ContainerCpu` reads the parent cgroup the
benchmark starts its containers under; :func:`daemon_cpu_seconds` adds dockerd and containerd.
"""

from __future__ import annotations

import os
import resource
from pathlib import Path

_V1 = Path("/sys/fs/cgroup/cpuacct")
_V2 = Path("/sys/fs/cgroup")


class CpuMeter:
    """Cumulative CPU seconds of this process tree; create it before starting any worker."""

    def __init__(self, name: str = "evobench-bench") -> None:
        """Join a fresh cgroup named ``name-<pid>`` if the machine allows it."""
        self._usage: Path | None = None
        self._v2 = False
        self.source = "getrusage (self + reaped children only)"
        tag = f"{name}-{os.getpid()}"
        try:
            if (_V1 / "cpuacct.usage").exists():
                d = _V1 / tag
                d.mkdir(exist_ok=True)
                (d / "cgroup.procs").write_text(str(os.getpid()))
                self._usage, self.source = d / "cpuacct.usage", "cgroup v1 cpuacct (whole process tree)"
            elif (_V2 / "cgroup.controllers").exists():
                rel = Path("/proc/self/cgroup").read_text().strip().split("::", 1)[1]
                d = (_V2 / Path(rel).relative_to("/")).parent / tag
                d.mkdir(exist_ok=True)
                (d / "cgroup.procs").write_text(str(os.getpid()))
                self._usage, self._v2 = d / "cpu.stat", True
                self.source = "cgroup v2 cpu.stat (whole process tree)"
        except (OSError, ValueError, IndexError):
            self._usage = None

    def seconds(self) -> float:
        """CPU seconds used so far by this process tree."""
        if self._usage is not None:
            text = self._usage.read_text()
            if self._v2:
                stat = dict(line.split() for line in text.splitlines())
                return int(stat["usage_usec"]) / 1e6
            return int(text) / 1e9
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class ContainerCpu:
    """CPU seconds of the containers started under one parent cgroup (``--cgroup-parent``).

    The cgroup v1 ``cpuacct`` parent keeps the usage of removed containers, so the counter covers
    every container started under :attr:`parent`, and nothing else on the machine.
    """

    def __init__(self, name: str = "evobench-bench-docker") -> None:
        """Pick a parent cgroup name unique to this process (docker creates it on first use)."""
        self.parent = f"/{name}-{os.getpid()}"

    def seconds(self) -> float | None:
        """CPU seconds so far (0 before the first container); None where unreadable (not cgroup v1)."""
        if not (_V1 / "cpuacct.usage").exists():
            return None
        usage = _V1 / self.parent.lstrip("/") / "cpuacct.usage"
        return int(usage.read_text()) / 1e9 if usage.exists() else 0.0


def daemon_cpu_seconds() -> float:
    """CPU seconds used so far by dockerd and containerd (shared with anyone else using Docker)."""
    total = 0.0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if Path(f"/proc/{name}/comm").read_text().strip() in ("dockerd", "containerd"):
                total += _proc_cpu(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return total
