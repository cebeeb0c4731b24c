"""What a warm zygote does after each candidate: wipe, check against its baseline, or get retired.

The backend-level check (every place a candidate can write, planted and looked for by the next
candidate) is ``test_no_leaks_between_candidates`` in the conformance suite; these tests drive one
zygote directly to tell a cleaned sandbox (same zygote, no warning) from a retired one (a warning,
a fresh sandbox), and check the trusted side's own look at a scratch directory.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.manifest import Hardware, Language
from harness.sandbox.isolation import UNPRIVILEGED_UID_BASE, detect_isolation
from harness.sandbox.process import Zygote, outside_leftovers
from harness.sandbox.runtime import SandboxedCandidate

HW = Hardware(cpus=1.0, memory_mb=1024, pids=32)
UID = UNPRIVILEGED_UID_BASE + 16 * 9 + 3

PROGRAM = r"""
import ctypes, os, socket

libc = ctypes.CDLL(None, use_errno=True)
KEY = 0x0E70C
NAME = "evobench-scrub"


def _tree(path, depth):
    os.mkdir(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir("dddddddd", dir_fd=fd)
        inner = os.open("dddddddd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    os.fchmod(fd, 0)
    os.close(fd)


def plant(depth):
    for d in ("/sandbox", "/tmp", "/dev/shm", os.getcwd()):
        base = os.path.join(d, NAME)
        os.mkdir(base + "-locked")
        open(os.path.join(base + "-locked", "x"), "w").close()
        os.chmod(base + "-locked", 0)
        open(base + "-file", "w").close()
        os.chmod(base + "-file", 0)
        os.mkfifo(base + "-fifo")
        socket.socket(socket.AF_UNIX).bind(base + "-sock")
        os.symlink("/", base + "-link")
    _tree("/tmp/" + NAME + "-tree", depth)
    os.setxattr("/sandbox", "user.scrub", b"1")
    made = [libc.shmget(KEY, 4096, 0o1000), libc.semget(KEY, 1, 0o1600), libc.msgget(KEY, 0o1600)]
    return [x >= 0 for x in made]


def mqueue():
    fd = libc.mq_open(b"/evobench-scrub", os.O_CREAT | os.O_RDWR, 0o600, None)
    return fd >= 0, ctypes.get_errno()


def renice_parent():
    os.setpriority(os.PRIO_PROCESS, os.getppid(), 7)
    return os.getpriority(os.PRIO_PROCESS, os.getppid())


def find():
    names = [n for d in ("/sandbox", "/tmp", "/dev/shm") for n in os.listdir(d) if "evobench" in n]
    try:
        xattr = os.getxattr("/sandbox", "user.scrub") == b"1"
    except OSError:
        xattr = False
    sysv = [libc.shmget(KEY, 0, 0) >= 0, libc.semget(KEY, 0, 0) >= 0, libc.msgget(KEY, 0) >= 0]
    return {"names": names, "xattr": xattr, "sysv": sysv, "nice": os.getpriority(os.PRIO_PROCESS, 0)}
"""

pytestmark = pytest.mark.skipif(
    detect_isolation().level != "bwrap", reason="needs bubblewrap (the local sandbox's isolation)"
)


@pytest.fixture
def zygote() -> Iterator[Zygote]:
    z = Zygote(HW, UID, (), HW.output_kb * 1024)
    yield z
    z.stop()
    z.discard_scratch()


def _candidate(zygote: Zygote) -> SandboxedCandidate:
    return SandboxedCandidate(
        PROGRAM,
        language=Language.PYTHON,
        filename="candidate.py",
        hw=HW,
        deadline=time.monotonic() + 60,
        uid=UID,
        zygote=zygote,
    )


def _run(zygote: Zygote, function: str, *args: object) -> object:
    cand = _candidate(zygote)
    try:
        return cand.call(function, *args).value
    finally:
        cand.close()


def _sandbox_pid(zygote: Zygote) -> int | None:
    proc = zygote._proc  # which sandbox: a retired zygote's successor is another process
    return proc.pid if proc is not None and proc.poll() is None else None


def test_mode_000_trees_sysv_and_xattrs_are_wiped_without_retiring(
    zygote: Zygote, caplog: pytest.LogCaptureFixture
) -> None:
    clean = _run(zygote, "find")
    first = _sandbox_pid(zygote)
    with caplog.at_level(logging.WARNING, logger="harness.sandbox.process"):
        assert _run(zygote, "plant", 1500) == [True, True, True]  # positive control
        seen = _run(zygote, "find")
    assert seen == clean, "the next candidate found what the previous one planted"
    assert _sandbox_pid(zygote) == first, "an ordinary wipe must not cost a fresh sandbox"
    assert not [r for r in caplog.records if "retiring" in r.getMessage()]


def test_posix_message_queues_cannot_be_created(zygote: Zygote) -> None:
    made, errno = _run(zygote, "mqueue")  # type: ignore[misc]
    assert not made and errno == 24  # EMFILE: RLIMIT_MSGQUEUE is 0, no queue can outlive a candidate


def test_what_the_wipe_cannot_undo_retires_the_zygote(
    zygote: Zygote, caplog: pytest.LogCaptureFixture
) -> None:
    baseline = _run(zygote, "find")
    first = _sandbox_pid(zygote)
    with caplog.at_level(logging.WARNING, logger="harness.sandbox.process"):
        assert _run(zygote, "renice_parent") == 7  # positive control: the zygote's nice value changed
    assert any("retiring" in r.getMessage() and "nice" in r.getMessage() for r in caplog.records)
    assert _sandbox_pid(zygote) is None, "the changed zygote must be stopped"
    assert _run(zygote, "find") == baseline  # a fresh zygote: not the next candidate's failure
    assert _sandbox_pid(zygote) not in (None, first)


def test_a_tree_past_the_depth_budget_retires_the_zygote(
    zygote: Zygote, caplog: pytest.LogCaptureFixture
) -> None:
    baseline = _run(zygote, "find")
    with caplog.at_level(logging.WARNING, logger="harness.sandbox.process"):
        assert _run(zygote, "plant", 4200) == [True, True, True]
    assert any("deeper than" in r.getMessage() for r in caplog.records), caplog.text
    assert _run(zygote, "find") == baseline


def test_outside_leftovers_sees_the_candidates_entries(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to create files of another uid")
    scratch = tmp_path / "scratch"
    shared = scratch / "trusted-workdir"
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    (scratch / "trusted-file").write_text("")
    assert outside_leftovers((str(scratch),), UID) == []  # only the trusted side's own entries
    inner = shared / "planted"
    inner.write_text("")
    os.chown(inner, UID, UID)
    locked = scratch / "locked"
    locked.mkdir(mode=0)
    os.chown(locked, UID, UID)
    assert sorted(outside_leftovers((str(scratch),), UID)) == [str(locked), str(inner)]
    assert len(outside_leftovers((str(scratch),), None)) == 3  # None: any entry is left over
    assert outside_leftovers((str(scratch),), UID, limit=2)[-1].startswith("more than 2 entries")


def test_the_trusted_side_looks_into_the_sandbox(zygote: Zygote) -> None:
    cand = _candidate(zygote)
    try:
        assert cand.call("plant", 10).value == [True, True, True]
        seen = zygote._outside_leftovers()  # while the candidate's entries are there
    finally:
        cand.close()
    assert any("evobench-scrub" in p for p in seen) and all("/proc/" in p for p in seen), seen
    assert zygote._outside_leftovers() == []  # after the reap
