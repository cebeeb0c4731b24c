"""Each worker pins its CPU-clocked sessions to a CPU of its own, leased across processes."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.hardware import cpus

ROOT = Path(__file__).resolve().parents[3]
MINE = sorted(os.sched_getaffinity(0))
two_cpus = pytest.mark.skipif(len(MINE) < 2, reason="needs two CPUs")


@pytest.fixture(autouse=True)
def leases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    before = list(cpus._worker_index)
    assert not cpus._lease, "a session of an earlier test still holds this process's CPU"
    monkeypatch.setattr(cpus, "LOCK_DIR", tmp_path / "leases")
    yield tmp_path / "leases"
    while cpus._lease:
        cpus.let_go_home_cpu()
    cpus._worker_index[:] = before


def _hold(lock_dir: Path, cpu: int) -> int:
    """Hold ``cpu``'s lease the way another process would (a lock on its own open file)."""
    lock_dir.mkdir(exist_ok=True)
    fd = os.open(lock_dir / f"cpu{cpu}.lock", os.O_RDONLY | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def test_outside_a_worker_the_last_cpu() -> None:
    cpus._worker_index.clear()
    assert cpus.home_cpu() == (MINE[-1],)
    assert not cpus._lease  # a look keeps nothing held


def test_workers_side_by_side_get_different_cpus() -> None:
    got = []
    for i in range(len(MINE)):
        cpus.set_worker_index(i)
        got.append(cpus.home_cpu())
    assert got == [(c,) for c in MINE]  # one each while there are CPUs enough


def test_holds_nest_and_the_last_gives_the_cpu_back(leases: Path) -> None:
    """Sessions of one process share its CPU (an evaluation's two sessions are timed on one)."""
    cpus._worker_index.clear()
    first = cpus.hold_home_cpu()
    assert cpus.hold_home_cpu() == first == (MINE[-1],)
    cpus.let_go_home_cpu()
    with pytest.raises(BlockingIOError):
        _hold(leases, MINE[-1])  # still held by the inner session
    cpus.let_go_home_cpu()
    os.close(_hold(leases, MINE[-1]))  # given back


@two_cpus
def test_a_cpu_another_process_holds_is_skipped() -> None:
    """Two processes that both prefer the last CPU end on two CPUs; a dead holder frees its CPU."""
    code = (
        "import sys; from pathlib import Path; from harness.hardware import cpus; "
        f"cpus.LOCK_DIR = Path({str(cpus.LOCK_DIR)!r}); print(cpus.hold_home_cpu()[0], flush=True); "
        "sys.stdin.read()"
    )
    other = subprocess.Popen(
        [sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert other.stdout is not None
        assert int(other.stdout.readline()) == MINE[-1]
        cpus._worker_index.clear()
        assert cpus.home_cpu() == (MINE[0],)  # wraps around past the held last CPU
    finally:
        other.communicate("", timeout=30)
    assert cpus.home_cpu() == (MINE[-1],)  # the holder exited: its lock went with it


def test_every_cpu_held_shares_the_preferred_one(leases: Path) -> None:
    fds = [_hold(leases, c) for c in MINE]
    try:
        cpus.set_worker_index(0)
        assert cpus.hold_home_cpu() == (MINE[0],)
        assert "fd" not in cpus._lease  # shared, not leased
        cpus.let_go_home_cpu()
    finally:
        for fd in fds:
            os.close(fd)
    assert cpus.hold_home_cpu() == (MINE[0],) and "fd" in cpus._lease


def test_no_lock_directory_falls_back_to_the_preferred_cpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(cpus, "LOCK_DIR", blocker / "leases")  # a directory under a file: mkdir fails
    cpus.set_worker_index(len(MINE))  # more workers than CPUs: round robin
    assert cpus.home_cpu() == (MINE[0],)
