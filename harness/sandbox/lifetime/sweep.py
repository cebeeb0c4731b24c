"""Find and remove what dead runs left on the host: scratch directories, semaphores, cgroups.

Every kind is recognised as a dead run's by a check that cannot hit a live run's resource:

- ``evobench-zygote-*`` and ``evobench-cand-*`` directories in the temporary directory carry
  their creator's owner tag (``owner.py``); they are removed once that process is gone.
- ``/dev/shm/sem.mp-*`` are the named semaphores of ``multiprocessing`` (spawn context); their
  names say nothing of the owner, but every process using one has it mapped. One that no process
  maps can never be used again (a later user would have to ``sem_open`` the name, and only a
  holder passes it on), so it is unlinked.
- Candidate cgroups carry the owner's pid and start time already (``limits.cgroups``).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .owner import Owner, own_tag, owner_alive

log = logging.getLogger(__name__)

LEFTOVER_PREFIXES = ("evobench-zygote-", "evobench-cand-")
"""Prefixes of the owner-tagged scratch directories a run creates in the temporary directory."""
SHM_DIR = Path("/dev/shm")
_SEM = re.compile(r"^sem\.mp-[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class Leftovers:
    """What dead runs left behind (counts), as found or removed by one sweep."""

    directories: int = 0
    """Owner-tagged scratch directories of dead owners."""
    semaphores: int = 0
    """``multiprocessing`` semaphores no process maps."""
    cgroups: int = 0
    """Candidate cgroups of dead owners."""

    @property
    def total(self) -> int:
        """All kinds together."""
        return self.directories + self.semaphores + self.cgroups


def dead_directories(root: Path | None = None) -> list[Path]:
    """Owner-tagged scratch directories under ``root`` (default: the temp dir) whose owner is gone."""
    base = Path(root or tempfile.gettempdir())
    out: list[Path] = []
    try:
        entries = list(base.iterdir())
    except OSError:
        return out
    for d in entries:
        prefix = next((p for p in LEFTOVER_PREFIXES if d.name.startswith(p)), None)
        if prefix is None:
            continue
        owner = Owner.parse(d.name[len(prefix) :])
        if owner is not None and not owner_alive(owner) and d.is_dir():
            out.append(d)
    return out


def _mapped_inodes(shm: Path) -> set[int]:
    """Inodes on ``shm``'s file system that some process has mapped (scans ``/proc/*/maps``).

    By inode, not name: glibc maps a semaphore under a temporary name before linking it to its
    final one, so the maps show ``sem.XXXXXX (deleted)``.
    """
    try:
        st = shm.stat()
    except OSError:
        return set()
    dev = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}"
    inodes: set[int] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
                for line in f:
                    fields = line.split(None, 5)
                    if len(fields) >= 5 and fields[3] == dev:
                        inodes.add(int(fields[4]))
        except (OSError, ValueError):
            continue  # gone, or not ours to read
    return inodes


def dead_semaphores(shm: Path = SHM_DIR) -> list[Path]:
    """``multiprocessing`` named semaphores under ``shm`` that no process maps."""
    try:
        sems = [p for p in shm.iterdir() if _SEM.match(p.name)]
    except OSError:
        return []
    if not sems:
        return []
    mapped = _mapped_inodes(shm)
    out = []
    for p in sems:
        try:
            if p.stat().st_ino not in mapped:
                out.append(p)
        except OSError:
            continue  # unlinked meanwhile
    return out


def _cgroups(remove: bool) -> int:
    from harness.sandbox.limits.cgroups import detect_hierarchy, stale_groups, sweep_stale

    hier = detect_hierarchy([])
    if hier is None:
        return 0
    parents = [p for p in (hier.memory_parent, hier.pids_parent) if p is not None]
    if remove:
        return sum(sweep_stale(p) for p in parents)
    return sum(len(stale_groups(p)) for p in parents)


def _detach_mount(p: Path) -> None:
    """Lazily unmount ``p`` if it is a mount point (a sized tmpfs of ``limits.disk``)."""
    if os.path.ismount(p):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if libc.umount2(os.fsencode(p), 2) != 0:  # MNT_DETACH
            log.warning("could not unmount leftover %s: %s", p, os.strerror(ctypes.get_errno()))


def _remove(paths: Iterable[Path], *, tree: bool) -> int:
    n = 0
    for p in paths:
        try:
            if tree:
                _detach_mount(p)  # a killed run's work-directory quota (a tmpfs) is still mounted
                shutil.rmtree(p)
            else:
                p.unlink()
            n += 1
        except FileNotFoundError:
            n += 1  # another sweeper was first
        except OSError as e:
            log.warning("could not remove leftover %s: %s", p, e)
    return n


def count_leftovers(*, tmp: Path | None = None, shm: Path = SHM_DIR, cgroups: bool = True) -> Leftovers:
    """Count what dead runs left behind, removing nothing."""
    return Leftovers(len(dead_directories(tmp)), len(dead_semaphores(shm)), _cgroups(False) if cgroups else 0)


def sweep_leftovers(*, tmp: Path | None = None, shm: Path = SHM_DIR, cgroups: bool = True) -> Leftovers:
    """Remove everything dead runs left behind (never a live run's resource); returns what went."""
    found = Leftovers(
        _remove(dead_directories(tmp), tree=True),
        _remove(dead_semaphores(shm), tree=False),
        _cgroups(True) if cgroups else 0,
    )
    if found.total:
        log.info("removed leftovers of dead runs: %s", found)
    return found


def remove_own(*, tmp: Path | None = None) -> int:
    """Remove this process's own tagged directories and candidate cgroups (a worker about to exit).

    Returns:
        How many were removed.
    """
    from harness.sandbox.limits.cgroups import PREFIX, _empty_and_remove, detect_hierarchy

    tag = own_tag()
    base = Path(tmp or tempfile.gettempdir())
    try:
        mine = [d for d in base.iterdir() if any(d.name.startswith(f"{p}{tag}-") for p in LEFTOVER_PREFIXES)]
    except OSError:
        mine = []
    n = _remove(mine, tree=True)
    hier = detect_hierarchy([])
    for parent in [p for p in (hier.memory_parent, hier.pids_parent) if p is not None] if hier else []:
        try:
            groups = [d for d in parent.iterdir() if d.name.startswith(f"{PREFIX}.{tag}.")]
        except OSError:
            continue
        n += sum(1 for d in groups if _empty_and_remove(d))
    return n
