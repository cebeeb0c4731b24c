"""ALE-Bench's time rules in the real sandbox, on a loaded host (environments/ahc_common/native.py).

A program that burns a fixed amount of CPU time per case (by its own precise CPU clock) runs on
``ahc039-tiny`` while CPU hogs compete for every core. 1.95 s is under the 2.0 s limit, so every
case must be ``ok`` whatever the load; 2.2 s is over it, so every case is ``tle`` (it is not killed
before 3.1 s). Repeated evaluations give identical per-case verdicts.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from environments.ahc_common.native import Limits, case_cpus
from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import EvalResult, Status
from harness.sandbox.limits.cpu import CaseClock, cpuacct_parent
from harness.sandbox.limits.memory import detect_memory_mechanism

pytestmark = [
    pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed"),
    pytest.mark.skipif(
        detect_memory_mechanism().kind != "cgroup-v2" and cpuacct_parent() is None,
        reason="no cgroup measures CPU time here (RLIMIT_CPU fallback)",
    ),
]

BURNER = r"""
#include <cstdio>
#include <cstdlib>
#include <ctime>

int main() {
    timespec t{};
    volatile unsigned long long z = 0;
    for (;;) {
        for (int i = 0; i < 20000; ++i) z += i;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
        if (t.tv_sec + t.tv_nsec * 1e-9 >= BURN) break;
    }
    std::fputs("4\n0 0\n100000 0\n100000 100000\n0 100000\n", stdout);  // a - b + 1 = 1
    return 0;
}
"""


@pytest.fixture(scope="module")
def backend() -> Iterator[object]:
    from harness.sandbox.local import LocalBackend

    with LocalBackend(workers=1) as b:
        yield b


@pytest.fixture(scope="module")
def tiny() -> Variant:
    return default_registry().get("ahc039-tiny")


@pytest.fixture()
def hogs() -> Iterator[None]:
    """One busy Python process per CPU, unpinned, for the whole test."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def evaluate(backend: object, variant: Variant, burn: float) -> EvalResult:
    result = backend.evaluate(variant, BURNER.replace("BURN", repr(burn)))  # type: ignore[attr-defined]
    assert isinstance(result, EvalResult)
    assert result.status is not Status.INFRA_ERROR, result.reason
    return result


def verdicts(result: EvalResult) -> list[tuple[str, str]]:
    return [(c.name, c.status) for c in result.cases]


@pytest.mark.slow
def test_195_s_of_cpu_is_ok_on_every_case_under_load(backend: object, tiny: Variant, hogs: None) -> None:
    first = evaluate(backend, tiny, 1.95)
    assert first.status is Status.OK, first.reason
    assert [s for _, s in verdicts(first)] == ["ok"] * 4, [c.reason for c in first.cases]
    for c in first.cases:
        assert c.cpu_seconds is not None and 1.95 <= c.cpu_seconds < 2.0
        assert c.wall_seconds is not None and c.wall_seconds >= c.cpu_seconds
    again = evaluate(backend, tiny, 1.95)
    assert verdicts(again) == verdicts(first)
    assert again.score == first.score == 1.0


@pytest.mark.slow
def test_22_s_of_cpu_is_tle_on_every_case_not_killed(backend: object, tiny: Variant, hogs: None) -> None:
    result = evaluate(backend, tiny, 2.2)
    assert result.status is Status.TIMEOUT, result.reason
    assert [s for _, s in verdicts(result)] == ["tle"] * 4
    for c in result.cases:
        assert c.cpu_seconds is not None and 2.2 <= c.cpu_seconds < 3.1  # ran to its end
        assert "CPU time over the 2 s limit" in c.reason


def test_case_clock_counts_a_child_tree_precisely() -> None:
    clock = CaseClock(None, None)
    if not clock.available:
        pytest.skip("no cgroup v1 cpuacct group can be made here (v2 uses the memory group)")
    try:
        code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
        p = subprocess.Popen([sys.executable, "-c", code], preexec_fn=clock.join)
        while p.poll() is None:
            clock.sample()
        assert 0.3 <= clock.cpu_seconds() < 0.3 + 0.5  # interpreter start-up included
        assert clock.active_seconds >= 0.0 and clock.wait_seconds >= 0.0
    finally:
        clock.close()


def test_never_more_concurrent_cases_than_cpus() -> None:
    mine = sorted(os.sched_getaffinity(0))
    assert case_cpus(100) == [(c,) for c in mine]
    assert case_cpus(1) == [(mine[0],)]
    limits = Limits()
    assert (limits.cpu_seconds, limits.wall_seconds) == (2.0, 2.5)
    assert (limits.cpu_kill_seconds, limits.wall_kill_seconds) == (3.1, 4.5)
