"""Per-candidate control groups (cgroup v2, or the v1 memory + pids controllers).

A candidate's process tree is placed in a cgroup of its own, created next to nothing else as a
child of the harness's own cgroup (or of ``EVOBENCH_CGROUP_PARENT``, e.g. a delegated subtree), so
its memory limit counts the pages it really uses (anonymous, page cache, tmpfs, kernel memory)
rather than the address space it reserves. Names carry the owner's pid and start time, so groups
left behind by a killed harness are recognised and removed by the next one.
"""

from __future__ import annotations

import errno
import itertools
import logging
import os
import re
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

PREFIX = "evobench"
_NAME = re.compile(rf"^{PREFIX}\.(\d+)\.(\d+)\.\d+$")
_counter = itertools.count(1)
_swept: set[str] = set()
_sweep_lock = threading.Lock()


class CgroupError(RuntimeError):
    """A cgroup could not be created, configured or joined (an infrastructure failure)."""


@dataclass(frozen=True)
class Hierarchy:
    """Where candidate cgroups are made, and with which interface."""

    version: int
    """2 (unified) or 1 (separate memory and pids hierarchies)."""
    memory_parent: Path
    """Directory under which memory cgroups are created."""
    pids_parent: Path | None
    """v1 only: directory under which pids cgroups are created (None: no pids controller)."""
    memsw: bool
    """v1 only: whether ``memory.memsw.limit_in_bytes`` exists (swap accounting)."""
    pids: bool
    """Whether a pids controller is available."""


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of every cgroup mount seen by this process."""
    out: list[tuple[str, str, set[str]]] = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, rfields = left.split(), right.split()
        if len(fields) < 5 or len(rfields) < 3 or rfields[0] not in ("cgroup", "cgroup2"):
            continue
        out.append((fields[4].replace("\\040", " "), rfields[0], set(rfields[2].split(","))))
    return out


def _own_paths() -> dict[str, str]:
    """Controller list (``""`` for v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            paths[controllers] = path
    except (OSError, ValueError):
        pass
    return paths


def _writable_dir(parent: Path) -> str | None:
    """None if a child group can be made and removed under ``parent``, else why not."""
    probe = parent / f"{PREFIX}-probe-{os.getpid()}-{threading.get_ident()}"
    try:
        probe.mkdir()
    except OSError as e:
        return f"cannot create a cgroup under {parent}: {e.strerror or e}"
    try:
        probe.rmdir()
    except OSError:
        pass
    return None


def _v2(reasons: list[str]) -> Hierarchy | None:
    mounts = [m for m in _mounts() if m[1] == "cgroup2"]
    own = _own_paths().get("")
    if not mounts or own is None:
        reasons.append("cgroup v2: not mounted")
        return None
    override = os.environ.get("EVOBENCH_CGROUP_PARENT")
    parent = Path(override) if override else Path(mounts[0][0]) / own.lstrip("/")
    try:
        available = (parent / "cgroup.controllers").read_text().split()
    except OSError as e:
        reasons.append(f"cgroup v2: {parent} unreadable ({e.strerror or e})")
        return None
    if "memory" not in available:
        reasons.append(f"cgroup v2: no memory controller delegated to {parent}")
        return None
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    want = [c for c in ("memory", "pids") if c in available and c not in enabled]
    if want:
        try:
            (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in want))
        except OSError as e:
            hint = (
                " (it holds processes: run the harness in a delegated leaf" if e.errno == errno.EBUSY else ""
            )
            reasons.append(
                f"cgroup v2: cannot enable {'+'.join(want)} in {parent}: {e.strerror or e}"
                + (hint + ", see EVOBENCH_CGROUP_PARENT)" if hint else "")
            )
            return None
    why = _writable_dir(parent)
    if why:
        reasons.append(f"cgroup v2: {why}")
        return None
    return Hierarchy(2, parent, None, memsw=False, pids="pids" in available)


def _v1(reasons: list[str]) -> Hierarchy | None:
    mounts = {opt: mp for mp, kind, opts in _mounts() if kind == "cgroup" for opt in opts}
    own = {c: p for cs, p in _own_paths().items() for c in cs.split(",") if c}
    if "memory" not in mounts or "memory" not in own:
        reasons.append("cgroup v1: no memory controller mounted")
        return None
    override = os.environ.get("EVOBENCH_CGROUP_PARENT")
    mem = Path(override) if override else Path(mounts["memory"]) / own["memory"].lstrip("/")
    why = _writable_dir(mem)
    if why:
        reasons.append(f"cgroup v1: {why}")
        return None
    pids: Path | None = None
    if "pids" in mounts and "pids" in own and not override:
        cand = Path(mounts["pids"]) / own["pids"].lstrip("/")
        pids = cand if _writable_dir(cand) is None else None
    memsw = (mem / "memory.memsw.limit_in_bytes").exists()
    return Hierarchy(1, mem, pids, memsw=memsw, pids=pids is not None)


def detect_hierarchy(reasons: list[str]) -> Hierarchy | None:
    """The cgroup hierarchy candidates can be placed in, or None (``reasons`` says why)."""
    return _v2(reasons) or _v1(reasons)


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _procs(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def _empty_and_remove(d: Path, attempts: int = 100) -> bool:
    """SIGKILL every process in ``d`` until it is empty, then remove it; True when gone."""
    for i in range(attempts):
        for pid in _procs(d):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            d.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(min(0.002 * (i + 1), 0.05))  # killed tasks take a moment to leave
    return False


def stale_groups(parent: Path) -> list[Path]:
    """Groups under ``parent`` whose owning harness process is gone."""
    try:
        entries = list(parent.iterdir())
    except OSError:
        return []
    out: list[Path] = []
    for d in entries:
        m = _NAME.match(d.name)
        if m and _start_time(int(m.group(1))) != int(m.group(2)) and d.is_dir():
            out.append(d)
    return out


def sweep_stale(parent: Path) -> int:
    """Remove groups under ``parent`` whose owning harness process is gone; returns how many."""
    removed = 0
    for d in stale_groups(parent):
        if _empty_and_remove(d):
            removed += 1
            log.info("removed stale cgroup %s", d)
    return removed


class CandidateCgroup:
    """One fresh cgroup (memory, and pids where available) for one candidate process tree."""

    def __init__(self, hier: Hierarchy, memory_bytes: int, pids: int | None) -> None:
        """Create the group(s) and set the limits.

        Raises:
            CgroupError: If the group cannot be created or configured.
        """
        self.hier = hier
        me = os.getpid()
        for parent in filter(None, (hier.memory_parent, hier.pids_parent)):
            with _sweep_lock:
                if str(parent) not in _swept:
                    _swept.add(str(parent))
                    sweep_stale(parent)
        name = f"{PREFIX}.{me}.{_start_time(me) or 0}.{next(_counter)}"
        self.dirs: list[Path] = []
        try:
            self.memory_dir = hier.memory_parent / name
            self.memory_dir.mkdir()
            self.dirs.append(self.memory_dir)
            self.pids_dir = self.memory_dir
            if hier.version == 1 and hier.pids_parent is not None:
                self.pids_dir = hier.pids_parent / name
                self.pids_dir.mkdir()
                self.dirs.append(self.pids_dir)
            self.limit_bytes = 1 << 62  # a new group is unlimited: the first change lowers
            self.configure(memory_bytes, pids)
            if hier.version == 2:
                # Swap would let a candidate exceed its limit silently (and slowly).
                _write_if_present(self.memory_dir / "memory.swap.max", "0")
            else:
                _write_if_present(self.memory_dir / "memory.swappiness", "0")
        except OSError as e:
            self.remove()
            raise CgroupError(f"could not set up cgroup {name}: {e}") from e

    def configure(self, memory_bytes: int, pids: int | None) -> None:
        """Set the memory and process limits and start counting OOM kills afresh.

        Raises:
            OSError: If the kernel refuses a value.
        """
        if pids is not None and self.hier.pids:
            (self.pids_dir / "pids.max").write_text(str(pids))
        self.set_memory(memory_bytes)
        self.reset_oom_baseline()

    def set_memory(self, memory_bytes: int) -> None:
        """Set the hard memory limit (v1: memory and memory+swap kept equal).

        Raises:
            OSError: If the kernel refuses the value.
        """
        d = self.memory_dir
        if self.hier.version == 2:
            (d / "memory.max").write_text(str(memory_bytes))
        else:
            files = ["memory.limit_in_bytes"] + (["memory.memsw.limit_in_bytes"] if self.hier.memsw else [])
            # memsw must never be below the plain limit: raise it first, lower it last.
            for f in reversed(files) if memory_bytes > self.limit_bytes else files:
                (d / f).write_text(str(memory_bytes))
        self.limit_bytes = memory_bytes

    def attach(self, pid: int) -> None:
        """Move process ``pid`` (a host pid) into the group(s); its future children follow.

        Raises:
            CgroupError: If the kernel refuses the move.
        """
        try:
            for d in self.dirs:
                (d / "cgroup.procs").write_text(str(pid))
        except OSError as e:
            raise CgroupError(f"could not move process {pid} into {self.memory_dir}: {e}") from e

    def usage_bytes(self) -> int:
        """Memory currently charged to the group."""
        f = "memory.current" if self.hier.version == 2 else "memory.usage_in_bytes"
        try:
            return int((self.memory_dir / f).read_text())
        except (OSError, ValueError):
            return 0

    def kill_all(self) -> bool:
        """SIGKILL every process in the group(s); True when none is left (they may still be exiting)."""
        left = False
        for d in self.dirs:
            for pid in _procs(d):
                left = True
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        return not left

    def wait_empty(self, timeout: float) -> bool:
        """SIGKILL until no process is left in the group(s); True when that happened within ``timeout``."""
        deadline = time.monotonic() + timeout
        while not self.kill_all():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def reset_oom_baseline(self) -> None:
        """Count OOM kills from now on (a reused group keeps its kernel counter)."""
        self._oom_base = self._oom_total()
        self._limit_base = self._event("oom")

    def _event(self, key: str) -> int:
        """A counter of ``memory.events`` (v2) or ``memory.oom_control`` (v1); 0 when absent."""
        f = "memory.events" if self.hier.version == 2 else "memory.oom_control"
        try:
            text = (self.memory_dir / f).read_text()
        except OSError:
            return 0
        m = re.search(rf"^{key} (\d+)$", text, re.M)
        return int(m.group(1)) if m else 0

    def _oom_total(self) -> int:
        """How many processes the kernel killed in this group for exceeding its memory limit."""
        return self._event("oom_kill")

    def host_oom_kills(self) -> int:
        """Kills in this group by the machine-wide OOM killer, not by the group's own limit.

        cgroup v2 counts every OOM kill of a member in ``oom_kill`` but only the group's own limit
        being hit in ``oom``: kills with no limit hit were the host's memory pressure, not the
        candidate's use. 0 where the kernel does not tell them apart (v1).
        """
        if self.hier.version != 2:
            return 0
        if self._event("oom") > getattr(self, "_limit_base", 0):
            return 0
        return self.oom_kills()

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group for exceeding its memory limit."""
        return self._oom_total() - getattr(self, "_oom_base", 0)

    def remove(self) -> None:
        """Kill whatever is left in the group(s) and delete them; idempotent."""
        for d in reversed(self.dirs):
            if d.exists() and not _empty_and_remove(d):
                log.warning("could not remove cgroup %s (processes still exiting)", d)
        self.dirs = []


class CgroupPool:
    """Empty candidate groups kept for reuse by this process.

    Creating and removing a group per candidate costs more than the candidate on small tasks:
    ``rmdir`` must wait until the killed tree has left, and both take the kernel's cgroup lock
    that every worker shares. A released group is therefore emptied (SIGKILL) and kept; the next
    candidate gets one that is empty, with its limits set afresh and its OOM count rebased.
    Groups still draining stay in the pool until they are empty. Names carry this process's pid
    and start time, so what a dead owner leaves behind is swept as before.
    """

    def __init__(self, keep: int = 4) -> None:
        """Keep at most ``keep`` idle groups (more are removed)."""
        self.keep = keep
        self._idle: list[CandidateCgroup] = []
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def acquire(self, hier: Hierarchy, memory_bytes: int, pids: int | None) -> CandidateCgroup:
        """An empty group of ``hier`` with these limits (reused when one is idle).

        Raises:
            CgroupError: If a new group cannot be created or configured.
        """
        if os.getpid() != self._pid:  # a forked child must not share its parent's groups
            self._idle, self._pid = [], os.getpid()
        with self._lock:
            for i, g in enumerate(self._idle):
                if g.hier is hier and g.kill_all():
                    del self._idle[i]
                    break
            else:
                g = None
        if g is None:
            return CandidateCgroup(hier, memory_bytes, pids)
        try:
            g.configure(memory_bytes, pids)
        except OSError as e:
            g.remove()
            raise CgroupError(f"could not reconfigure cgroup {g.memory_dir}: {e}") from e
        return g

    def release(self, g: CandidateCgroup) -> None:
        """Kill what is left in ``g`` and keep it for the next candidate (or remove it)."""
        g.kill_all()
        with self._lock:
            if len(self._idle) < self.keep and g.dirs:
                self._idle.append(g)
                return
        g.remove()


POOL = CgroupPool()
"""This process's pool of idle candidate groups."""


def _write_if_present(path: Path, value: str) -> None:
    if path.exists():
        try:
            path.write_text(value)
        except OSError:
            pass
