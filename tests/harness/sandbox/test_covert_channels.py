"""No bit passes between two sandboxes through locks on the inodes every sandbox shares.

Every sandbox binds the same host files read-only (``/usr``, the Python installation, the shim,
``/dev/null``); a lock on one of them used to be visible in every other sandbox (issue 20 item 5).
The control below shows the channel on unfiltered processes, so the sandboxed check can fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.manifest import Hardware, Language
from harness.sandbox.isolation import UNPRIVILEGED_UID_BASE, detect_isolation
from harness.sandbox.runtime import SandboxedCandidate

PROGRAM = r'''
import fcntl, os, struct, sys

F_OFD_GETLK, F_OFD_SETLK = 36, 37
_held = []

def files():
    return ["/dev/null", "/usr/bin/env", os.path.realpath(sys.executable), os.__file__]

def _flock(kind):
    return struct.pack("hhqqi", kind, 0, 0, 0, 0)

def hold():
    """Take every kind of lock a read-only descriptor allows, and keep them."""
    for path in files():
        f = open(path, "rb")
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        g = open(path, "rb")
        fcntl.fcntl(g, fcntl.F_SETLK, _flock(fcntl.F_RDLCK))
        h = open(path, "rb")
        fcntl.fcntl(h, F_OFD_SETLK, _flock(fcntl.F_RDLCK))
        _held.extend([f, g, h])
    return len(_held)

def probe():
    """Every lock of another process this process can observe: (kind, path) pairs."""
    seen = []
    for path in files():
        with open(path, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(f, fcntl.LOCK_UN)
            except OSError:
                seen.append(["flock", path])
            for name, cmd in (("posix", fcntl.F_GETLK), ("ofd", F_OFD_GETLK)):
                try:
                    out = fcntl.fcntl(f, cmd, _flock(fcntl.F_WRLCK))
                except OSError:
                    continue  # refused: nothing observed
                if struct.unpack("hhqqi", out)[0] != fcntl.F_UNLCK:
                    seen.append([name, path])
    return seen

def spawn_daemon(marker):
    """A detached grandchild in its own session, still alive when the call returns."""
    import subprocess
    code = "import time; time.sleep(120)"
    p = subprocess.Popen([sys.executable, "-c", code, marker], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return p.pid

if __name__ == "__main__":
    if sys.argv[1] == "hold":
        print(hold(), flush=True)
        sys.stdin.read()
    else:
        print(probe())
'''

HW = Hardware(cpus=1.0, memory_mb=1024, pids=32)

pytestmark = pytest.mark.skipif(
    detect_isolation().level != "bwrap", reason="needs bubblewrap (the local sandbox's isolation)"
)


def _candidate(uid_offset: int) -> SandboxedCandidate:
    return SandboxedCandidate(
        PROGRAM,
        language=Language.PYTHON,
        filename="candidate.py",
        hw=HW,
        deadline=time.monotonic() + 60,
        uid=UNPRIVILEGED_UID_BASE + 16 * 7 + uid_offset,
        zygote=None,
    )


@pytest.fixture
def pair() -> Iterator[tuple[SandboxedCandidate, SandboxedCandidate]]:
    a, b = _candidate(14), _candidate(15)
    yield a, b
    a.close()
    b.close()


def test_control_unsandboxed_processes_see_each_others_locks(tmp_path) -> None:
    script = tmp_path / "locks.py"
    script.write_text(PROGRAM)
    holder = subprocess.Popen(
        [sys.executable, str(script), "hold"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and int(holder.stdout.readline()) == 12
        probe = [sys.executable, str(script), "probe"]
        out = subprocess.run(probe, capture_output=True, text=True, check=True)
        seen = eval(out.stdout)  # noqa: S307 - our own probe's repr of a list of lists
        assert {kind for kind, _ in seen} == {"flock", "posix", "ofd"}
    finally:
        holder.kill()
        holder.wait()


def test_two_concurrent_sandboxes_see_no_lock(pair: tuple[SandboxedCandidate, SandboxedCandidate]) -> None:
    a, b = pair
    assert a.call("hold").value == 12
    assert b.call("probe").value == []
    # The run() path (a command started through the filter launcher) sees none either.
    (b.workdir / "locks.py").write_text(PROGRAM)
    res = b.run(["{python}", "-I", "locks.py", "probe"], timeout=30)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().strip() == "[]"


def _host_pids_with(marker: str) -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and marker.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                pids.append(int(name))
        except OSError:
            continue
    return pids


def test_end_calls_returns_after_every_process_of_the_phase_is_gone(
    pair: tuple[SandboxedCandidate, SandboxedCandidate],
) -> None:
    a, _ = pair
    marker = f"evobench-phase-{uuid.uuid4().hex}"
    assert a.call("hold").value == 12
    assert a.call("spawn_daemon", marker).value > 0
    deadline = time.monotonic() + 10
    while not _host_pids_with(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _host_pids_with(marker), "the detached child should be running before end_calls"
    a.end_calls()
    assert _host_pids_with(marker) == []
    # A call after end_calls runs in a fresh process, which holds nothing of the old one.
    assert a.call("probe").value == []
