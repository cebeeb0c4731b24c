"""The OS-measured kernel time on CPU: the sandbox's cgroup CPU over a case, whatever is reported.

The driver runs as a plain subprocess placed in a cpuacct / v2 group of its own (as the sandbox's
``CaseClock`` places it), so the session finds its counter through the socket's peer. Candidates
spin on their own CPU clock (``time.thread_time``), so the CPU they use does not depend on the
machine's load; their reports are forged to 1 us.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.evaluation.errors import CandidateInvalid
from harness.kernels.session import DriverParams, KernelSession
from harness.kernels.timing import PROBE_REF_S, fastest_probe
from harness.sandbox.launch import fill, project_root
from harness.sandbox.limits.cpu import CaseClock, cpuacct_parent
from harness.scoring.api import ExecResult

SPIN_MS = 3.0
CHILD_MS = 6.0

# Spins SPIN_MS of its own CPU per call, reports 1 us (json.dumps is what the driver sends through);
# FORK: after each reply a forked child spins CHILD_MS more while the scorer runs its echo.
CANDIDATE = """
import json, os, time
_dumps = json.dumps
def _lie(obj, *a, **k):
    if isinstance(obj, dict) and obj.get("type") == "result":
        obj = {**obj, "host": 1e-6}
        if FORK and os.fork() == 0:
            t = time.thread_time()
            while time.thread_time() - t < CHILD_MS / 1e3:
                pass
            os._exit(0)
    return _dumps(obj, *a, **k)
json.dumps = _lie
def custom_kernel(data):
    t = time.thread_time()
    while time.thread_time() - t < SPIN_MS / 1e3:
        pass
    return data[0] * 2.0
"""


class GroupRuntime:
    """Runs the driver as a plain subprocess in a CPU-accounting cgroup of its own."""

    def __init__(self, workdir: Path, source: str, group: bool = True) -> None:
        self.workdir, self.source, self.group = workdir, source, group
        self.deadline = time.monotonic() + 120.0

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def run(self, argv: list[str], stdin: bytes = b"", timeout: float | None = None, **kw: Any) -> ExecResult:
        argv = fill(argv, sys.executable, str(project_root()))
        clock = CaseClock(None, None) if self.group else None
        try:
            p = subprocess.run(
                argv,
                cwd=self.workdir,
                input=stdin,
                capture_output=True,
                timeout=timeout,
                preexec_fn=clock.join if clock else None,
            )
            return ExecResult(p.returncode, p.stdout, p.stderr, 0.0, 0.0)
        finally:
            if clock:
                clock.close()


class Recording(GroupRuntime):
    """A :class:`GroupRuntime` that keeps the keyword arguments of its last run (``cpus``...)."""

    seen: dict[str, Any]

    def run(self, argv: list[str], stdin: bytes = b"", timeout: float | None = None, **kw: Any) -> ExecResult:
        self.seen = kw
        return super().run(argv, stdin, timeout)


needs_cpuacct = pytest.mark.skipif(cpuacct_parent() is None, reason="no writable v1 cpuacct hierarchy")


def _case(
    tmp_path: Path, fork: bool, group: bool = True, flag: bool = False, child_ms: float = CHILD_MS
) -> tuple[float, Any]:
    src = f"FORK = {fork}\nSPIN_MS = {SPIN_MS}\nCHILD_MS = {child_ms}\n" + CANDIDATE
    # flag=False: no report is suspect, so the counted figure is seen (a 1 us report is flagged).
    ratio = 0.5 if flag else 0.0
    params = DriverParams(entry="custom_kernel", device="cpu", pin_echo=False, suspect_ratio=ratio)
    x = torch.ones(4, 4)
    with KernelSession(GroupRuntime(tmp_path, src, group), params) as s:  # type: ignore[arg-type]
        s.call([x], "warm-up", [("float32", (4, 4))], timed=False)

        def more() -> float:
            return s.call_many([[x]] * 4, "call", [[("float32", (4, 4))]] * 4)[1].seconds

        times = [more() for _ in range(6)]
        assert s.os_clock is group
        return s.close_case(times, more, "case")


@needs_cpuacct
def test_the_os_figure_counts_the_cpu_used_whatever_is_reported(tmp_path: Path) -> None:
    mean, b = _case(tmp_path, fork=False)
    assert b.clock == "os-cpu" and b.os_calls == 20  # the window: after the first request of 4 calls
    assert b.reported_median < 1e-5  # the forged report
    # 3 ms of CPU per call really spent: the OS figure sees it (less only the echo's transport work),
    # and counts it at the reference speed (the spin is CPU time, not work: only the raw figure is 3 ms).
    assert b.os_cpu_raw >= 0.8 * SPIN_MS / 1e3, b
    assert mean == b.os_cpu == pytest.approx(b.os_cpu_raw * PROBE_REF_S / b.probe), b


@needs_cpuacct
def test_a_report_far_under_the_os_figure_is_flagged(tmp_path: Path) -> None:
    with pytest.raises(CandidateInvalid, match="rule 'timing'.*its process tree used"):
        _case(tmp_path, fork=False, flag=True)


@needs_cpuacct
def test_forked_helpers_between_calls_are_counted(tmp_path: Path) -> None:
    mean, b = _case(tmp_path, fork=True)
    # Each of the 6 requests leaves a child spinning 6 ms while the scorer echoes: 1.5 ms per call more.
    assert b.os_cpu_raw >= 0.8 * (SPIN_MS + CHILD_MS / 4) / 1e3, b


@needs_cpuacct
def test_a_tree_busy_during_the_speed_probe_counts_at_the_fastest_probe(tmp_path: Path) -> None:
    """Children spinning 30 ms after every reply overlap the trusted speed probe that follows it
    (contention could slow the probe and so scale the figure down): every probe of the window is
    replaced by the process's fastest, which no candidate can make slower."""
    mean, b = _case(tmp_path, fork=True, child_ms=30.0)
    # A child scheduled late on a loaded machine leaves its probe undisturbed and its own, slowed
    # by the host's load, not by the tree (CI: 1.32x the fastest once, beside another test worker):
    # the scaling stays within that of the fastest probe and never falls below it.
    fastest = fastest_probe()
    assert fastest * 0.999 <= b.probe <= 1.6 * fastest, b
    assert mean == pytest.approx(b.os_cpu_raw * PROBE_REF_S / b.probe), b


def test_without_a_cgroup_counter_the_round_trip_bound_counts(tmp_path: Path) -> None:
    """No counter (no cgroup here, ``EVOBENCH_MEMORY_LIMIT=rlimit``): today's bound, which flags
    a report under a tenth of it (12 ms of spinning per request against 4 us reported)."""
    with pytest.raises(CandidateInvalid, match="rule 'timing'.*trusted round trips"):
        _case(tmp_path, fork=False, group=False, flag=True)


def test_where_the_round_trip_counts_the_echo_gets_a_cpu_the_sandbox_cannot_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The GPU path's defence against a candidate loading the echo (forked burners): on a machine
    of 2+ CPUs the echo is pinned to the last one and the sandbox to the others."""
    import os

    import harness.kernels.session as session_mod

    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip("one CPU: nothing to split")
    monkeypatch.setattr(session_mod, "group_cpu_possible", lambda: False)  # as on GPU / no cgroup

    params = DriverParams(entry="custom_kernel", device="cpu")
    src = "def custom_kernel(data):\n    return data[0] * 2.0\n"
    rt = Recording(tmp_path, src, group=False)
    with KernelSession(rt, params) as s:  # type: ignore[arg-type]
        assert s._echo is not None
        assert os.sched_getaffinity(s._echo.proc.pid) == {mine[-1]}
        assert not s.os_clock
    assert tuple(rt.seen["cpus"]) == tuple(mine[:-1])


@needs_cpuacct
def test_the_os_clock_puts_sandbox_echo_and_probe_on_one_cpu(tmp_path: Path) -> None:
    """A VM's CPUs differ in speed from moment to moment: the CPU the sandbox's time is counted on
    is the one the echo subtracted from it and the probe scaling it were measured on."""
    import os

    import harness.kernels.session as session_mod

    mine = sorted(os.sched_getaffinity(0))
    probed: list[Any] = []
    real_probe = session_mod.speed_probe

    def probe(*a: Any, **kw: Any) -> float:
        probed.append(kw.get("cpus"))
        return real_probe(*a, **kw)

    params = DriverParams(entry="custom_kernel", device="cpu")
    src = "def custom_kernel(data):\n    return data[0] * 2.0\n"
    x = torch.ones(4, 4)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(session_mod, "speed_probe", probe)
        rt = Recording(tmp_path, src)
        with KernelSession(rt, params) as s:  # type: ignore[arg-type]
            assert s._echo is not None
            echo = os.sched_getaffinity(s._echo.proc.pid)
            s.call_many([[x]] * 2, "call", [[("float32", (4, 4))]] * 2)
            assert s.os_clock
    # One CPU of this process's, the one leased (another test process may hold the last one).
    assert len(echo) == 1 and echo <= set(mine), echo
    assert set(rt.seen["cpus"]) == echo
    assert probed and all(set(c) == echo for c in probed)


class _Counter:
    """The sandbox's CPU counter as the probe reads it: ``step`` ns more at every read."""

    def __init__(self, step: int) -> None:
        self.ns, self.step = 0, step

    def read_ns(self) -> int:
        self.ns += self.step
        return self.ns


@pytest.mark.parametrize(("step", "stands_in"), [(10**6, True), (0, False)], ids=["busy", "quiet"])
def test_a_probe_beside_a_busy_tree_is_replaced_by_the_fastest(
    monkeypatch: pytest.MonkeyPatch, step: int, stands_in: bool
) -> None:
    """The rule itself, scheduling aside: where the tree used more than ``PROBE_QUIET_NS`` during
    the probe, exactly the process's fastest probe counts (here a sentinel no real probe reaches),
    else the probe just measured."""
    from harness.kernels import timing

    monkeypatch.setitem(timing._fastest_probe, "matmul", 1e-9)
    s = KernelSession(None, DriverParams(entry="custom_kernel", device="cpu"))  # type: ignore[arg-type]
    s._cpu = _Counter(step)  # type: ignore[assignment]
    got = s._probe()
    assert (got == 1e-9) is stands_in, got
