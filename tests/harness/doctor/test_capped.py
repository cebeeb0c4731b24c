"""``run_capped``: the doctor's caps kill the whole process group, pipe-holding grandchildren too."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from harness.doctor.capped import run_capped


def test_a_command_that_ends_reports_its_status_and_output() -> None:
    res = run_capped(
        [sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], 30
    )
    assert res.returncode == 3 and not res.timed_out
    assert "out" in res.output and "err" in res.output


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is dead, waiting for its reaper


def test_at_its_cap_the_group_is_killed_even_a_grandchild_holding_the_pipe() -> None:
    # A grandchild keeps stdout open: subprocess.run(timeout=...) would wait on it after the kill.
    code = (
        "import os, time\n"
        "if os.fork() == 0:\n"
        "    print('grandchild', os.getpid(), flush=True)\n"
        "    time.sleep(60)\n"
        "time.sleep(60)\n"
    )
    t0 = time.monotonic()
    res = run_capped([sys.executable, "-c", code], 1.5)
    assert res.timed_out and time.monotonic() - t0 < 8
    pid = int(res.output.split("grandchild")[1].split()[0])
    time.sleep(0.3)
    assert not _running(pid)


def test_a_command_that_cannot_start_is_127() -> None:
    res = run_capped(["/nonexistent/doctor-probe"], 5)
    assert res.returncode == 127 and "cannot start" in res.output
