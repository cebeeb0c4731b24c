"""One ``bench: error:`` line per user-facing failure; stop signals handled like Ctrl-C."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from evobench.cli.failures import SignalInterrupt, stop_signals_interrupt, user_error
from harness.results.atomic import LockHeldError, lock_file, unlock_file
from harness.results.store import RunLockedError


@pytest.mark.parametrize(
    ("code", "fix"),
    [(errno.ENOSPC, "free space"), (errno.EROFS, "read-only"), (errno.EACCES, "permissions")],
)
def test_os_errors_name_the_path_and_the_fix(code: int, fix: str) -> None:
    msg = user_error(OSError(code, os.strerror(code), "/data/results/run/run.json"))
    assert "/data/results/run/run.json" in msg and fix in msg and "\n" not in msg


def test_lock_held_names_the_live_holder_not_a_stale_stamp(tmp_path: Path) -> None:
    lock = tmp_path / "eplb.parquet.lock"
    lock.write_text("pid 999999")  # the stamp of a writer that died long ago
    holder = subprocess.Popen(["flock", str(lock), "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # wait for flock to hold it
            try:
                unlock_file(lock_file(lock))
            except LockHeldError:
                break
            time.sleep(0.05)
        with pytest.raises(LockHeldError) as err:
            lock_file(lock, timeout=0.1)
        msg = user_error(err.value)
        assert f"pid {holder.pid}" in msg and "flock" in msg
        assert "pid 999999" in msg and "no longer running" in msg
    finally:
        holder.kill()
        holder.wait()


def test_locked_run_message_names_the_holder_and_the_fix() -> None:
    msg = user_error(RunLockedError("results/r is being written by pid 7; wait for that run to end"))
    assert "pid 7" in msg and "wait" in msg


def test_sigterm_and_sighup_raise_an_interrupt_inside_the_block() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        before = signal.getsignal(sig)
        with pytest.raises(KeyboardInterrupt) as err, stop_signals_interrupt():
            os.kill(os.getpid(), sig)
            time.sleep(5)  # interrupted long before
        assert isinstance(err.value, SignalInterrupt) and err.value.signal_name == sig.name
        assert signal.getsignal(sig) == before


@pytest.fixture
def readonly_dir(tmp_path: Path) -> Iterator[Path]:
    """A read-only tmpfs (skipped where this process may not mount)."""
    d = tmp_path / "ro"
    d.mkdir()
    if subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,ro", "tmpfs", str(d)], capture_output=True
    ).returncode:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield d
    finally:
        subprocess.run(["umount", str(d)], check=False)


RUN = ["run", "--agent", "random-search", "--env", "selftest-tiny", "--max-evaluations", "2", "--no-progress"]


def test_read_only_results_dir_is_one_error_line(
    readonly_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evobench.cli.main import main

    assert main([*RUN, "--results-dir", str(readonly_dir / "results")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"bench: error: --results-dir {readonly_dir / 'results'}")
    assert "Read-only file system" in err[0] and "writable --results-dir" in err[0]


def test_read_only_leaderboard_dir_is_refused_before_the_run_starts(
    readonly_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was found only once the whole run had been evaluated (the row could not be appended)."""
    from evobench.cli.main import main

    results = tmp_path / "results"
    assert main([*RUN, "--results-dir", str(results), "--leaderboard-dir", str(readonly_dir)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"bench: error: --leaderboard-dir {readonly_dir} is not writable"
    )
    assert "Read-only file system" in err[0]
    assert not any(results.iterdir())  # no run directory: nothing was evaluated
    assert os.listdir(readonly_dir) == []  # the write check left nothing behind


def test_a_file_in_place_of_the_leaderboard_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evobench.cli.main import main

    (tmp_path / "lb").write_text("not a directory")
    results = tmp_path / "results"
    assert main([*RUN, "--results-dir", str(results), "--leaderboard-dir", str(tmp_path / "lb")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"bench: error: --leaderboard-dir {tmp_path / 'lb'} is a file, not a directory"]
    assert not any(results.iterdir())


def test_the_write_check_creates_a_missing_directory_and_leaves_it_empty(tmp_path: Path) -> None:
    from evobench.cli.failures import unwritable

    assert unwritable(tmp_path / "a" / "b", "--leaderboard-dir") is None
    assert list((tmp_path / "a" / "b").iterdir()) == []


def test_resume_checks_the_runs_recorded_leaderboard_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agents.random_search import RandomSearchAgent
    from evobench.cli.main import main
    from harness.budget import Budget
    from harness.envs.registry import default_registry
    from harness.runner.runner import create_run

    (tmp_path / "lb").write_text("not a directory")
    store = create_run(
        results_dir=tmp_path / "results", variant=default_registry().get("selftest-tiny"),
        agent=RandomSearchAgent(), seed=0, budget=Budget(max_evaluations=2), backend="local", workers=1,
        leaderboard_dir=tmp_path / "lb",
    )  # fmt: skip
    store.close()
    assert main(["run", "--resume", str(store.run_dir), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"bench: error: the run's leaderboard directory {tmp_path / 'lb'} is a file, not a directory"
    ]
    assert (store.run_dir / "candidates.jsonl").read_bytes() == b""  # nothing was evaluated
