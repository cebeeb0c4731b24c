"""The local backend's sandboxes: cold mode starts no zygote; an outside kill is the host's fault."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from harness.envs.registry import default_registry
from harness.evaluation.result import Status
from harness.sandbox.isolation import detect_isolation
from harness.sandbox.local import LocalBackend

from ..runner.faults import descendants, leftovers, semaphores_now


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _ppid(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2 :].split()[1])


def _ours_before() -> set[int]:
    """This test process's descendants before the test: the suite's shared backends, not ours."""
    return {o.pid for o in descendants(os.getpid())}


def _zygotes(exclude: set[int]) -> list[int]:
    return [o.pid for o in descendants(os.getpid()) if o.pid not in exclude and " zygote " in _cmdline(o.pid)]


def test_cold_mode_starts_no_zygote_and_a_normal_close_leaves_nothing() -> None:
    v = default_registry().get("selftest-tiny")
    sems = semaphores_now()
    before = _ours_before()
    with LocalBackend(workers=1, mode="cold", prewarm=(v.id,)) as b:
        assert b.evaluate(v, v.initial_program).status is Status.OK
        # the resource tracker serves this (test) process for its whole life: not the backend's
        procs = [
            o
            for o in descendants(os.getpid())
            if o.pid not in before and "resource_tracker" not in _cmdline(o.pid)
        ]
        assert procs and _zygotes(before) == []
    assert leftovers(procs, sems).total == 0


@pytest.mark.skipif(detect_isolation().level != "bwrap", reason="needs bubblewrap")
def test_zygote_killed_from_outside_is_infra_error_not_the_candidates() -> None:
    v = default_registry().get("selftest-tiny")
    slow = "import time\n\ndef probe():\n    time.sleep(8)\n    return {'x': 1.0}\n"
    before = _ours_before()
    with LocalBackend(workers=1, mode="warm", prewarm=(v.id,), infra_retries=0) as b:
        assert b.evaluate(v, v.initial_program).status is Status.OK  # the zygote is up
        bwraps = [p for p in _zygotes(before) if _cmdline(p).startswith("bwrap")]
        outer = [p for p in bwraps if _ppid(p) not in bwraps]  # not bwrap's own in-namespace init
        assert len(outer) == 1
        killer = threading.Timer(2.0, os.kill, args=(outer[0], signal.SIGKILL))
        killer.start()
        t0 = time.monotonic()
        res = b.evaluate(v, slow)
        killer.join()
        assert time.monotonic() - t0 < 8, "the kill did not end the candidate"
        assert res.status is Status.INFRA_ERROR, res
        assert "killed from outside" in res.reason and "not the candidate's doing" in res.reason
        assert b.evaluate(v, v.initial_program).status is Status.OK  # a fresh zygote serves on
