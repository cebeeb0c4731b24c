"""``PreloadedBench``: ``bench`` commands forked from one process that imported their libraries once
behave as fresh processes (output, exit codes, a hung one killed), and the server refuses to fork
while a thread runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from evobench.cli.preloaded import PreloadedBench, PreloadError

BENCH = [sys.executable, "-m", "evobench.cli.main"]


def test_commands_answer_as_fresh_processes_do(tmp_path: Path) -> None:
    fresh = subprocess.run([*BENCH, "envs", "--json"], capture_output=True, text=True, cwd=tmp_path)
    with PreloadedBench(modules=("json",)) as pb:
        listed = pb.run(["envs", "--json"])
        unknown = pb.run(["run", "--agent", "random-serch", "--env", "eplb-tiny"], timeout=120)
        again = pb.run(["envs", "--json"])  # the server goes on after a failed command
    assert listed.returncode == 0 and listed.stdout == fresh.stdout == again.stdout
    assert unknown.returncode == 2 and "random-search" in unknown.stderr


@pytest.mark.run
def test_a_command_runs_in_its_own_directory(tmp_path: Path) -> None:
    here = tmp_path / "here"
    here.mkdir()
    with PreloadedBench(modules=("json",)) as pb:
        r = pb.run(["run", "--agent", "random-search", "--env", "selftest-tiny", "--max-evaluations", "1",
                    "--no-progress"], cwd=here, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr
    # relative output directories resolve in the command's directory, as for a fresh `bench`
    assert (here / "leaderboards" / "selftest.parquet").is_file()
    assert len(list((here / "results").iterdir())) == 1


@pytest.mark.sandbox
def test_a_hung_command_is_killed_at_its_timeout(tmp_path: Path) -> None:
    program = tmp_path / "sleeper.py"
    # `probe` is selftest's entry point: the candidate really hangs (until the env's 10 s limit), so
    # the command outlives its 3 s timeout however fast this machine imports
    program.write_text("import time\n\ndef probe():\n    time.sleep(600)\n")
    with PreloadedBench(modules=("json",)) as pb:
        with pytest.raises(subprocess.TimeoutExpired):
            pb.run(["eval", "--env", "selftest-tiny", str(program)], timeout=3)
        assert pb.run(["envs", "--json"]).returncode == 0  # and the server still serves


def test_the_server_refuses_to_fork_beside_a_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "spins_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
    )
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    with PreloadedBench(modules=("spins_a_thread",)) as pb, pytest.raises(PreloadError, match="ended"):
        pb.run(["envs", "--json"])
