"""Owner tags: a host resource's name carries its creator's pid and start time.

A pid alone is reused; pid plus the kernel's start time (clock ticks since boot, field 22 of
``/proc/<pid>/stat``) names one process for the machine's uptime. A resource whose tag names no
running process was left behind by a run that died, and any later run may remove it.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

_TAG = re.compile(r"(\d+)\.(\d+)")


def start_time(pid: int) -> int | None:
    """The kernel start time of ``pid`` (None when no such process is visible)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat[stat.rindex(")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Owner:
    """The process that created a resource."""

    pid: int
    """Its pid."""
    start: int
    """Its kernel start time (tells a reused pid apart)."""

    @property
    def tag(self) -> str:
        """``<pid>.<start>``: the form used inside resource names."""
        return f"{self.pid}.{self.start}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner named by a leading ``<pid>.<start>`` in ``text`` (None if there is none)."""
        m = _TAG.match(text)
        return cls(int(m.group(1)), int(m.group(2))) if m else None


def own_tag() -> str:
    """This process's owner tag (computed per call: a forked child has its own)."""
    pid = os.getpid()
    return Owner(pid, start_time(pid) or 0).tag


def owner_alive(owner: Owner) -> bool:
    """Whether the owning process still runs (same pid, same start time)."""
    return start_time(owner.pid) == owner.start


def tagged_tempdir(kind: str) -> Path:
    """A fresh private temporary directory named ``evobench-<kind>-<owner tag>-XXXX``.

    Raises:
        OSError: If the directory cannot be created.
    """
    return Path(tempfile.mkdtemp(prefix=f"evobench-{kind}-{own_tag()}-"))
