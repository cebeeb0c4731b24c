"""Kills of both kinds, SIGTERM and resume from elsewhere: nothing left behind, nothing lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from .faults import (
    BENCH,
    descendants,
    journal_rows,
    leftovers,
    run_cmd,
    semaphores_now,
    soak,
    survivors,
    wait_for_run,
)

N = 16
RUN = run_cmd("eplb-tiny", N)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["process", "group"])
def test_kill_9_leaves_nothing_and_resume_lands_where_the_run_belongs(tmp_path: Path, kind: str) -> None:
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir(), elsewhere.mkdir()
    sems = semaphores_now()
    proc = subprocess.Popen(RUN, cwd=home, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)  # fmt: skip
    try:
        d = wait_for_run(home / "results", 4, proc)
        procs = descendants(proc.pid)
    finally:
        (os.kill if kind == "process" else os.killpg)(proc.pid, signal.SIGKILL)
        proc.wait()
    assert len(procs) >= 3  # two workers and the resource tracker at least
    assert survivors(procs) == []  # workers, tracker and sandboxes die with the run
    rows_before = len(journal_rows(d))

    # Resumed from another directory: the run's own leaderboard dir, mode and workers are used.
    r = subprocess.run([*BENCH, "run", "--resume", str(d), "--no-progress"], cwd=elsewhere,
                       capture_output=True, text=True, timeout=600)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    seqs = [row["seq"] for row in journal_rows(d)]
    assert sorted(seqs) == list(range(N)) and len(seqs) == N >= rows_before
    info = json.loads((d / "run.json").read_text())
    assert (info["status"], info["leaderboard"], info["mode"]) == ("finished", "added", "warm")
    lb = pd.read_parquet(home / "leaderboards" / "eplb.parquet")
    assert lb["run_id"].tolist() == [info["run_id"]]
    assert not (elsewhere / "leaderboards").exists()
    left = leftovers(procs, sems)
    assert left.total == 0, left  # the resume swept whatever the killed run could not remove


@pytest.mark.slow
def test_sigterm_is_an_interrupt_and_leaves_nothing(tmp_path: Path) -> None:
    sems = semaphores_now()
    proc = subprocess.Popen(RUN, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    d = wait_for_run(tmp_path / "results", 3, proc)
    procs = descendants(proc.pid)
    os.kill(proc.pid, signal.SIGTERM)  # what `timeout`, SLURM and Kubernetes send
    try:
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "interrupted by SIGTERM" in err and f"bench run --resume results/{d.name}" in err
    info = json.loads((d / "run.json").read_text())
    assert info["status"] == "interrupted" and info["n_evaluations"] == len(journal_rows(d))
    assert survivors(procs) == []
    assert leftovers(procs, sems).total == 0


@pytest.mark.slow
def test_soak_200_evaluations_with_kills_of_both_kinds(tmp_path: Path) -> None:
    r = soak(tmp_path, "selftest-tiny", 200, ["process", "group", "process", "group"])
    assert [k.kind for k in r.kills] == ["process", "group", "process", "group"]
    assert all(k.left.processes == 0 and k.orphan_rss_kib == 0 for k in r.kills), r.kills
    # kill -9 of the bench process alone: workers clean up after themselves, the tracker unlinks
    assert all(k.left.total == 0 for k in r.kills if k.kind == "process"), r.kills
    assert (r.rows, r.distinct_seqs, r.parquet_rows, r.leaderboard_rows) == (200, 200, 200, 1)
    assert r.final.total == 0, r.final
