"""What a run leaves behind: owner tags, the sweep of dead runs' leftovers, the parent watchdog."""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harness.sandbox.lifetime import Owner, own_tag, owner_alive, sweep_leftovers
from harness.sandbox.lifetime.owner import start_time
from harness.sandbox.lifetime.sweep import dead_directories, dead_semaphores


@given(st.integers(1, 2**22), st.integers(0, 2**62), st.text(max_size=12))
def test_owner_tag_round_trips(pid: int, start: int, rest: str) -> None:
    o = Owner(pid, start)
    assert Owner.parse(f"{o.tag}-{rest}") == o


def test_own_process_is_alive_and_a_reused_pid_is_not() -> None:
    me = Owner.parse(own_tag())
    assert me is not None and owner_alive(me)
    assert not owner_alive(Owner(os.getpid(), (start_time(os.getpid()) or 0) + 1))


def test_only_dead_owners_directories_are_swept(tmp_path: Path) -> None:
    live = tmp_path / f"evobench-cand-{own_tag()}-abcd"
    dead = tmp_path / f"evobench-zygote-{os.getpid()}.{(start_time(os.getpid()) or 0) + 1}-efgh"
    untagged = tmp_path / "evobench-zygote-xyz12345"  # an older harness's: owner unknown, kept
    other = tmp_path / "something-else"
    for d in (live, dead, untagged, other):
        (d / "sub").mkdir(parents=True)
    assert dead_directories(tmp_path) == [dead]
    gone = sweep_leftovers(tmp=tmp_path, shm=tmp_path, cgroups=False)
    assert gone.directories == 1 and not dead.exists()
    assert live.exists() and untagged.exists() and other.exists()


def test_only_unmapped_semaphores_are_swept(tmp_path: Path) -> None:
    dead, live, other = tmp_path / "sem.mp-dead0001", tmp_path / "sem.mp-live0001", tmp_path / "sem.other"
    for p in (dead, live, other):
        p.write_bytes(b"\0" * 32)
    with open(live, "r+b") as f, mmap.mmap(f.fileno(), 32):  # a live process uses it
        assert dead_semaphores(tmp_path) == [dead]
        gone = sweep_leftovers(tmp=tmp_path, shm=tmp_path, cgroups=False)
        assert gone.semaphores == 1
    assert not dead.exists() and live.exists() and other.exists()


_CHILD = """
import sys, time
from pathlib import Path
from harness.sandbox.lifetime import start_parent_watchdog
start_parent_watchdog(lambda: Path(sys.argv[1]).write_text("cleaned"), poll_s=0.05)
print("ready", flush=True)
time.sleep(60)
"""

_PARENT = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "ready"
print(child.pid, flush=True)
time.sleep(60)
"""


def test_watchdog_cleans_up_and_exits_when_the_parent_is_killed(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, _CHILD, str(marker)], stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None
    child = int(parent.stdout.readline())
    os.kill(parent.pid, signal.SIGKILL)  # like `kill -9` of the bench process
    parent.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _state(child) not in ("Z", "gone"):
        time.sleep(0.05)
    assert marker.read_text() == "cleaned"
    assert _state(child) in ("Z", "gone")  # a zombie until its new parent reaps it: dead either way


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0]
    except (OSError, IndexError):
        return "gone"
