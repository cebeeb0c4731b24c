"""Memory limits that measure use: real cgroups where this machine has them, RLIMIT_DATA otherwise."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from harness.sandbox.limits import CandidateMemory, detect_memory_mechanism
from harness.sandbox.limits.cgroups import POOL, PREFIX, sweep_stale

MECH = detect_memory_mechanism()
needs_cgroup = pytest.mark.skipif(MECH.hierarchy is None, reason=f"no usable cgroup here: {MECH.reasons}")

TOUCH = textwrap.dedent(
    """
    import mmap, sys
    reserved = mmap.mmap(-1, 16 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)
    m = mmap.mmap(-1, int(sys.argv[1]) << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    for i in range(0, len(m), 4096):
        m[i] = 1
    print("touched", len(m) >> 20)
    """
)


def _touch(mib: int, memory: CandidateMemory) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", TOUCH, str(mib)],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=memory.join,
    )


@needs_cgroup
def test_cgroup_counts_touched_pages_not_reservations() -> None:
    mem = CandidateMemory(128, pids=16)
    try:
        ok = _touch(32, mem)
        assert ok.returncode == 0 and "touched 32" in ok.stdout, ok.stderr
        assert not mem.oom_killed()
        over = _touch(512, mem)
        assert over.returncode == -9, (over.returncode, over.stderr)
        assert mem.oom_killed()
        assert "memory limit 128 MiB (cgroup-v" in mem.label()
    finally:
        mem.close()
    assert mem.cgroup is not None and _empty_or_gone(mem.cgroup.memory_dir)
    # The group is reused: the next candidate gets fresh limits and its own OOM count. Earlier
    # tests in this process may have left idle groups in the pool too; any of them is a reuse.
    idle = {g.memory_dir for g in POOL._idle}
    assert mem.cgroup.memory_dir in idle
    again = CandidateMemory(64, pids=8)
    try:
        assert again.cgroup is not None and again.cgroup.memory_dir in idle
        assert not again.oom_killed()
        assert int((again.cgroup.memory_dir / "memory.limit_in_bytes").read_text()) == 64 * 1024 * 1024
        assert _touch(16, again).returncode == 0 and not again.oom_killed()
    finally:
        again.close()


def _empty_or_gone(d: Path) -> bool:
    return not d.exists() or not (d / "cgroup.procs").read_text().split()


@needs_cgroup
def test_close_kills_escaped_processes_and_removes_the_group() -> None:
    mem = CandidateMemory(256, pids=16)
    assert mem.cgroup is not None
    # A daemonised grandchild (own session) that nothing but the cgroup still tracks.
    subprocess.run(
        [sys.executable, "-c", "import os,time\nif os.fork()==0:\n    os.setsid(); time.sleep(600)"],
        preexec_fn=mem.join,
        timeout=30,
    )
    procs = (mem.cgroup.memory_dir / "cgroup.procs").read_text().split()
    assert len(procs) == 1, procs
    mem.close()

    def dead() -> bool:
        try:
            return "Z" in Path(f"/proc/{procs[0]}/stat").read_text().split()[2]
        except OSError:
            return True

    deadline = time.monotonic() + 10  # SIGKILL is sent at close; the kernel finishes it shortly
    while not dead() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert dead()
    assert _empty_or_gone(mem.cgroup.memory_dir)


@needs_cgroup
def test_stale_groups_of_dead_owners_are_swept() -> None:
    assert MECH.hierarchy is not None
    parent = MECH.hierarchy.memory_parent
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = parent / f"{PREFIX}.{dead.pid}.1.1"
    mine = CandidateMemory(64, pids=None)  # owned by this live process: must survive the sweep
    stale.mkdir()
    try:
        assert sweep_stale(parent) >= 1
        assert not stale.exists()
        assert mine.cgroup is not None and mine.cgroup.memory_dir.exists()
    finally:
        if stale.exists():
            stale.rmdir()
        mine.close()


def test_rlimit_data_ignores_reservations_and_stops_writes() -> None:
    import resource

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (256 << 20, 256 << 20))

    ok = subprocess.run(
        [sys.executable, "-c", TOUCH, "32"], capture_output=True, text=True, timeout=60, preexec_fn=limit
    )
    assert ok.returncode == 0 and "touched 32" in ok.stdout, ok.stderr
    over = subprocess.run(
        [sys.executable, "-c", TOUCH, "512"], capture_output=True, text=True, timeout=60, preexec_fn=limit
    )
    assert over.returncode == 1 and "Errno 12" in over.stderr, over.stderr


def test_forced_fallback_makes_no_cgroup(monkeypatch: pytest.MonkeyPatch) -> None:
    detect_memory_mechanism.cache_clear()
    monkeypatch.setenv("EVOBENCH_MEMORY_LIMIT", "rlimit")
    try:
        mem = CandidateMemory(100, pids=8)
        assert mem.cgroup is None and mem.data_limit_bytes == 100 << 20
        assert mem.label() == "memory limit 100 MiB (rlimit-data)"
        assert not mem.oom_killed()
    finally:
        detect_memory_mechanism.cache_clear()


HEAVY_IMPORTS = textwrap.dedent(
    """
    import importlib.util
    import numpy, torch
    names = ["numpy", "torch"]
    if importlib.util.find_spec("triton") is not None:  # shipped with CUDA builds of torch
        import triton
        names.append("triton")
    print(",".join(names), torch.version.cuda)
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("mechanism", ["cgroup", "rlimit"])
def test_limits_never_block_heavy_imports(mechanism: str) -> None:
    """1 GiB (the self-test's limit) of use is far more than importing these needs.

    Under ``RLIMIT_AS`` a CUDA build of torch failed here: it reserves many GiB of address space.
    """
    import resource

    if mechanism == "cgroup" and MECH.hierarchy is None:
        pytest.skip(f"no usable cgroup here: {MECH.reasons}")
    mem = CandidateMemory(1024, pids=64) if mechanism == "cgroup" else None

    def limit() -> None:
        if mem is not None:
            mem.join()
        else:
            resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, 1 << 30))

    try:
        argv = [sys.executable, "-c", HEAVY_IMPORTS]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=300, preexec_fn=limit)
        assert r.returncode == 0, r.stderr[-2000:]
        assert r.stdout.startswith("numpy,torch"), r.stdout
        assert mem is None or not mem.oom_killed()
    finally:
        if mem is not None:
            mem.close()


def _groups(parent: Path, owners: set[int]) -> set[str]:
    """Names of candidate groups under ``parent`` owned by these pids (other runs share ``parent``)."""
    return {
        d.name
        for d in parent.iterdir()
        if d.name.startswith(PREFIX + ".") and int(d.name.split(".")[1]) in owners
    }


@needs_cgroup
@pytest.mark.parametrize("mode", ["warm", "cold"])
def test_killed_workers_leave_no_cgroup(mode: str) -> None:
    """``terminate`` (Ctrl-C) SIGKILLs workers mid-evaluation; their candidates' groups still go."""
    import time

    from harness.envs.registry import default_registry
    from harness.sandbox.local import LocalBackend

    assert MECH.hierarchy is not None
    parent = MECH.hierarchy.memory_parent
    variant = default_registry().get("selftest-tiny")
    backend = LocalBackend(workers=1, mode=mode)  # type: ignore[arg-type]
    try:
        backend.submit(variant, "import time\ndef probe():\n    time.sleep(60)\n")
        workers = {p.pid for p in backend._get_pool()._processes.values() if p.pid}
        deadline = time.monotonic() + 90
        while not _groups(parent, workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _groups(parent, workers), "positive control: the candidate's cgroup never appeared"
    finally:
        backend.terminate()
    assert not _groups(parent, workers)


def test_v2_paths_on_a_stand_in_hierarchy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """This machine has no cgroup v2 memory controller: the v2 file protocol is checked on plain files.

    (The kernel side, limits and OOM kills, is exercised by the tests above on real v1 groups.)
    """
    from harness.sandbox.limits import cgroups

    own = tmp_path / "user.slice" / "app.scope"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text("cpu io memory pids\n")
    (own / "cgroup.subtree_control").write_text("")
    monkeypatch.setattr(cgroups, "_mounts", lambda: [(str(tmp_path), "cgroup2", {"rw"})])
    monkeypatch.setattr(cgroups, "_own_paths", lambda: {"": "/user.slice/app.scope"})
    reasons: list[str] = []
    hier = cgroups._v2(reasons)
    assert hier is not None and hier.version == 2 and hier.pids and reasons == []
    assert hier.memory_parent == own
    assert (own / "cgroup.subtree_control").read_text() == "+memory +pids"

    group = cgroups.CandidateCgroup(hier, 256 << 20, pids=12)
    d = group.memory_dir
    assert d.parent == own and cgroups._NAME.match(d.name)
    assert (d / "memory.max").read_text() == str(256 << 20)
    assert (d / "pids.max").read_text() == "12"
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.oom_kills() == 1
    group.attach(99_999_999)  # beyond pid_max: no real process
    assert (d / "cgroup.procs").read_text() == "99999999"

    (own / "cgroup.controllers").write_text("cpu io\n")
    reasons.clear()
    assert cgroups._v2(reasons) is None
    assert reasons == [f"cgroup v2: no memory controller delegated to {own}"]
