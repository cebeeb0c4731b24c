"""Kernel objects other than locks that two concurrently running sandboxes must not share.

SysV IPC and POSIX message queues (``--unshare-ipc``), abstract Unix sockets (``--unshare-net``),
``/dev/shm`` and ``/tmp`` (a tmpfs per sandbox), the uid's keyring and inotify
(:mod:`harness.sandbox.syscall_filter`). Each object is created by one sandbox and looked for from
a second; the positive control sees it from inside the first.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from harness.envs.manifest import Hardware, Language
from harness.sandbox.isolation import UNPRIVILEGED_UID_BASE, detect_isolation
from harness.sandbox.runtime import SandboxedCandidate

PROGRAM = r"""
import ctypes, os, socket

libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x0E70B
_keep = []

def create():
    made = {}
    made["sysv_shm"] = libc.shmget(KEY, 4096, 0o1666) >= 0  # IPC_CREAT | 0666
    made["sysv_sem"] = libc.semget(KEY, 1, 0o1666) >= 0
    for path in ("/dev/shm/evobench-covert", "/tmp/evobench-covert"):
        with open(path, "w") as f:
            f.write("1")
        made[path] = True
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind("\0evobench-covert")
    s.listen(1)
    _keep.append(s)
    made["abstract_socket"] = True
    made["keyring"] = libc.syscall(248, b"user", b"evobench-covert", b"1", 1, -4) >= 0  # add_key @u
    made["inotify"] = libc.inotify_init1(0) >= 0
    return made

def find():
    seen = {}
    seen["sysv_shm"] = libc.shmget(KEY, 0, 0) >= 0
    seen["sysv_sem"] = libc.semget(KEY, 0, 0) >= 0
    for path in ("/dev/shm/evobench-covert", "/tmp/evobench-covert"):
        seen[path] = os.path.exists(path)
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect("\0evobench-covert")
        seen["abstract_socket"] = True
    except OSError:
        seen["abstract_socket"] = False
    seen["keyring"] = libc.syscall(250, 10, -4, b"user", b"evobench-covert", 0) >= 0  # KEYCTL_SEARCH
    seen["inotify"] = libc.inotify_init1(0) >= 0
    return seen
"""

pytestmark = pytest.mark.skipif(
    detect_isolation().level != "bwrap", reason="needs bubblewrap (the local sandbox's isolation)"
)


def _candidate(uid_offset: int) -> SandboxedCandidate:
    return SandboxedCandidate(
        PROGRAM,
        language=Language.PYTHON,
        filename="candidate.py",
        hw=Hardware(cpus=1.0, memory_mb=1024, pids=32),
        deadline=time.monotonic() + 60,
        uid=UNPRIVILEGED_UID_BASE + 16 * 7 + uid_offset,
        zygote=None,
    )


@pytest.fixture
def pair() -> Iterator[tuple[SandboxedCandidate, SandboxedCandidate]]:
    a, b = _candidate(12), _candidate(13)
    yield a, b
    a.close()
    b.close()


def test_objects_of_one_sandbox_are_invisible_to_another(
    pair: tuple[SandboxedCandidate, SandboxedCandidate],
) -> None:
    a, b = pair
    made = a.call("create").value
    # Positive control: everything but the filtered calls exists inside the creating sandbox.
    assert made == {
        "sysv_shm": True,
        "sysv_sem": True,
        "/dev/shm/evobench-covert": True,
        "/tmp/evobench-covert": True,
        "abstract_socket": True,
        "keyring": False,
        "inotify": False,
    }
    assert a.call("find").value["sysv_shm"] and a.call("find").value["abstract_socket"]
    assert not any(b.call("find").value.values())
