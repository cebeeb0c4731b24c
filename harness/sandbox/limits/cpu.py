"""Precise CPU time and run-queue wait of one sandboxed process tree (judging contests' time limits).

Why not ``RLIMIT_CPU`` and ``wait4``: the kernel charges ``RLIMIT_CPU`` in scheduler ticks (4 ms
here), so a process whose own precise clock reads 1.8 s can be killed at a 2 s limit; and under
bubblewrap ``wait4`` reports the launcher's usage, not the sandboxed command's. A cgroup's CPU
counter (v1 ``cpuacct.usage``, v2 ``cpu.stat`` ``usage_usec``) covers every process of the tree to
the nanosecond, also after they were killed.

Why run-queue wait: on a loaded host a case's elapsed time measures the host, not the program.
``/proc/<pid>/schedstat`` gives each process's time spent runnable but waiting for a CPU; elapsed
minus that wait (:attr:`CaseClock.active_seconds`) is the time the program ran or slept by its own
choice, which is what a wall-clock rule is meant to bound. The wait is sampled while the tree runs
(the last few milliseconds before an exit are missed), so it errs towards a longer elapsed time.
"""

from __future__ import annotations

import itertools
import os
import time
from functools import cache
from pathlib import Path

from .cgroups import PREFIX, _empty_and_remove, _mounts, _own_paths, _start_time

_counter = itertools.count(1)


@cache
def cpuacct_parent() -> Path | None:
    """Where per-case v1 ``cpuacct`` groups are made (None: no writable v1 cpuacct hierarchy)."""
    mounts = {opt: mp for mp, kind, opts in _mounts() if kind == "cgroup" for opt in opts}
    own = {c: p for cs, p in _own_paths().items() for c in cs.split(",") if c}
    if "cpuacct" not in mounts or "cpuacct" not in own:
        return None
    parent = Path(mounts["cpuacct"]) / own["cpuacct"].lstrip("/")
    probe = parent / f"{PREFIX}-cpuprobe-{os.getpid()}"
    try:
        probe.mkdir()
        probe.rmdir()
    except OSError:
        return None
    return parent


class CaseClock:
    """CPU seconds and run-queue wait of one process tree, from a cgroup of its own.

    Use: :meth:`join` in the child before ``exec`` (after the memory group's join), :meth:`sample`
    while it runs, :meth:`cpu_seconds` / :attr:`active_seconds` at any time, :meth:`close` after.
    """

    def __init__(self, memory_dir: Path | None, cgroup_version: int | None) -> None:
        """Find or make the group whose CPU counter covers the tree.

        Args:
            memory_dir: The tree's v2 cgroup (its ``cpu.stat`` is used), or None.
            cgroup_version: Version of ``memory_dir``'s hierarchy (None without one).
        """
        self._own: Path | None = None
        self._v2: Path | None = memory_dir if cgroup_version == 2 else None
        if self._v2 is None and (parent := cpuacct_parent()) is not None:
            me = os.getpid()
            d = parent / f"{PREFIX}.{me}.{_start_time(me) or 0}.cpu{next(_counter)}"
            try:
                d.mkdir()
                self._own = d
            except OSError:
                self._own = None
        self._base = self._read_ns() or 0
        self._t0 = time.perf_counter()
        self._wait_ns: dict[int, int] = {}

    @property
    def available(self) -> bool:
        """Whether CPU time is measured precisely here."""
        return self._v2 is not None or self._own is not None

    def join(self) -> None:
        """Put the calling process into the group (``preexec_fn``)."""
        if self._own is not None:
            (self._own / "cgroup.procs").write_text(str(os.getpid()))

    def _read_ns(self) -> int | None:
        try:
            if self._v2 is not None:
                for line in (self._v2 / "cpu.stat").read_text().splitlines():
                    if line.startswith("usage_usec "):
                        return int(line.split()[1]) * 1000
                return None
            if self._own is not None:
                return int((self._own / "cpuacct.usage").read_text())
        except (OSError, ValueError):
            return None
        return None

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) of the whole tree so far; NaN when not measurable."""
        ns = self._read_ns()
        return float("nan") if ns is None else max(0, ns - self._base) / 1e9

    def _procs(self) -> list[int]:
        d = self._own or self._v2
        try:
            return [int(x) for x in (d / "cgroup.procs").read_text().split()] if d else []
        except (OSError, ValueError):
            return []

    def sample(self) -> None:
        """Record the run-queue wait of every process now in the group (call every few ms)."""
        for pid in self._procs():
            try:
                fields = Path(f"/proc/{pid}/schedstat").read_text().split()
                self._wait_ns[pid] = max(self._wait_ns.get(pid, 0), int(fields[1]))
            except (OSError, ValueError, IndexError):
                continue

    @property
    def wait_seconds(self) -> float:
        """Run-queue wait of the tree's processes (main threads), summed, at most elapsed less CPU.

        Summed because the launcher's processes and the program run one after another; bounded
        because waits of processes that ran side by side overlap (the bound keeps elapsed less
        wait at or above the CPU time, which the CPU rule limits anyway).
        """
        total = sum(self._wait_ns.values()) / 1e9
        cpu = self.cpu_seconds()
        elapsed = time.perf_counter() - self._t0
        return max(0.0, min(total, elapsed - (cpu if cpu == cpu else 0.0)))

    @property
    def active_seconds(self) -> float:
        """Elapsed seconds since construction minus :attr:`wait_seconds`."""
        return max(0.0, time.perf_counter() - self._t0 - self.wait_seconds)

    def close(self) -> None:
        """Remove the group made for this tree (killing anything left in it); idempotent."""
        if self._own is not None:
            _empty_and_remove(self._own)
            self._own = None


def thread_cpu_ns(pid: int) -> int | None:
    """CPU nanoseconds of every thread of ``pid`` (``/proc/<pid>/task/*/schedstat``), or None.

    The scheduler's own run-time counter, the one a cgroup's CPU counter sums: for a trusted
    process that forks nothing (the kernel families' echo) it is the same measurement as
    :class:`GroupCpu` on a sandboxed tree. Threads that already exited are not counted.
    """
    total, seen = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
            seen = True
        except (OSError, ValueError, IndexError):
            continue
    return total if seen else None


class GroupCpu:
    """Live CPU counter of the per-candidate cgroup a (sandboxed) process is in.

    Found from the process's ``/proc/<pid>/cgroup``: a v1 ``cpuacct`` group (``cpuacct.usage``,
    nanoseconds; made by :class:`CaseClock`) or else its v2 group (``cpu.stat`` ``usage_usec``).
    Only a group the harness made for one candidate counts (its name starts with ``PREFIX.`` and
    it is not this process's own group): a shared group would count other work.
    """

    def __init__(self, path: Path, version: int) -> None:
        """Bind the group directory (``version`` 1: ``cpuacct.usage``, 2: ``cpu.stat``)."""
        self.path, self.version = path, version

    @classmethod
    def of_pid(cls, pid: int) -> GroupCpu | None:
        """The counter of ``pid``'s own candidate group, or None where there is none."""
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return None
        mounts = _mounts()
        v1 = {opt: mp for mp, kind, opts in mounts if kind == "cgroup" for opt in opts}
        v2 = [mp for mp, kind, _ in mounts if kind == "cgroup2"]
        own = _own_paths()
        found: list[GroupCpu] = []
        for line in lines:
            try:
                _, controllers, path = line.split(":", 2)
            except ValueError:
                continue
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if not name.startswith(f"{PREFIX}."):
                continue
            if "cpuacct" in controllers.split(",") and "cpuacct" in v1:
                if {c: p for cs, p in own.items() for c in cs.split(",")}.get("cpuacct") != path:
                    found.insert(0, cls(Path(v1["cpuacct"]) / path.lstrip("/"), 1))
            elif controllers == "" and v2 and own.get("") != path:
                found.append(cls(Path(v2[0]) / path.lstrip("/"), 2))
        for g in found:
            if g.read_ns() is not None:
                return g
        return None

    def read_ns(self) -> int | None:
        """CPU nanoseconds the group's processes used so far (None once it is gone)."""
        try:
            if self.version == 1:
                return int((self.path / "cpuacct.usage").read_text())
            for line in (self.path / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec "):
                    return int(line.split()[1]) * 1000
        except (OSError, ValueError):
            return None
        return None


def group_cpu_possible() -> bool:
    """Whether a sandboxed run can get a CPU counter of its own here (v1 cpuacct or v2 groups)."""
    from .memory import detect_memory_mechanism

    return cpuacct_parent() is not None or detect_memory_mechanism().kind == "cgroup-v2"


def settle(pid: int, timeout: float = 0.02) -> bool:
    """Wait (at most ``timeout`` s) until ``pid`` sleeps; whether it does (False: gone or busy).

    A running task's CPU counters (``schedstat``, a cgroup's usage) lag by up to a scheduler tick
    (4 ms here): they are exact once it has blocked, e.g. in ``recv`` after answering a request.
    """
    end = time.perf_counter() + timeout
    while True:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            state = stat[stat.rindex(")") + 2]
        except (OSError, ValueError, IndexError):
            return False
        if state in "SDI":
            return True
        if time.perf_counter() >= end:
            return False
        time.sleep(0)
