"""End-to-end runs with the offline baseline: journal, parquet, leaderboard, kill -9 and resume, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

BENCH = [sys.executable, "-m", "evobench.cli.main"]
RUN = [
    *BENCH,
    "run",
    "--agent",
    "random-search",
    "--env",
    "eplb-tiny",
    "--seed",
    "3",
    "--workers",
    "2",
    "--max-evaluations",
    "20",
    "--no-progress",
]


def _journal_rows(run_dir: Path) -> list[dict]:
    p = run_dir / "candidates.jsonl"
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a torn last line
    return out


def _single_run_dir(root: Path) -> Path:
    dirs = [d for d in (root / "results").iterdir() if d.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def _wait_for_rows(root: Path, n: int, proc: subprocess.Popen, timeout: float = 180) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "run ended before it could be interrupted"
        res = root / "results"
        if res.exists() and any(res.iterdir()):
            d = _single_run_dir(root)
            if len(_journal_rows(d)) >= n:
                return d
        time.sleep(0.05)
    raise AssertionError("run made no progress")


def test_run_writes_twenty_rows_and_a_leaderboard_row(tmp_path: Path) -> None:
    r = subprocess.run(RUN, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    d = _single_run_dir(tmp_path)
    df = pd.read_parquet(d / "candidates.parquet")
    assert len(df) == 20 and sorted(df["seq"]) == list(range(20))
    assert (df["status"] == "ok").sum() >= 1
    info = json.loads((d / "run.json").read_text())
    assert info["status"] == "finished" and info["n_evaluations"] == 20
    for key in (
        "env_id",
        "env_version",
        "env_hash",
        "agent",
        "agent_version",
        "agent_config",
        "seed",
        "package_versions",
        "git_commit",
        "host",
        "started_at",
        "ended_at",
    ):
        assert key in info
    assert info["package_versions"].get("torch")
    for sha in df["program_sha256"]:
        assert list((d / "programs" / sha[:2]).glob(f"{sha}.*")), sha
    lb = pd.read_parquet(tmp_path / "leaderboards" / "eplb.parquet")
    assert len(lb) == 1 and lb["run_id"].iloc[0] == info["run_id"] and lb["n_evaluations"].iloc[0] == 20
    shown = subprocess.run(
        [*BENCH, "leaderboard", "--env", "eplb-tiny"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0 and "random-search" in shown.stdout


def test_kill_9_then_resume_ends_with_exactly_twenty_evaluations(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        RUN, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        d = _wait_for_rows(tmp_path, 6, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = {row["seq"]: row for row in _journal_rows(d)}
    assert 6 <= len(before) < 20
    assert json.loads((d / "run.json").read_text())["status"] == "running"

    r = subprocess.run(
        [*BENCH, "run", "--resume", str(d), "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    rows = _journal_rows(d)
    seqs = [row["seq"] for row in rows]
    assert sorted(set(seqs)) == list(range(20))
    assert len(seqs) == 20, "a finished candidate was evaluated again"
    for seq, row in before.items():
        after = next(x for x in rows if x["seq"] == seq)
        assert after["finished_at"] == row["finished_at"]
    assert len(pd.read_parquet(d / "candidates.parquet")) == 20
    assert json.loads((d / "run.json").read_text())["status"] == "finished"
    again = subprocess.run(
        [*BENCH, "run", "--resume", str(d)], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    # A finished run resumes to a no-op that makes sure its leaderboard row is there.
    assert again.returncode == 0 and "already finished" in again.stdout, again.stderr


def _start_in_own_group(root: Path) -> subprocess.Popen[str]:
    """``bench run`` as a shell starts it: a process group of its own, which a Ctrl-C reaches whole."""
    return subprocess.Popen(
        RUN,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _ctrl_c(proc: subprocess.Popen[str]) -> str:
    """Send SIGINT to the run's whole group, as a terminal does; its stderr once it has ended."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return err


def test_ctrl_c_stops_cleanly_and_is_resumable(tmp_path: Path) -> None:
    proc = _start_in_own_group(tmp_path)
    d = _wait_for_rows(tmp_path, 3, proc)
    err = _ctrl_c(proc)
    assert proc.returncode == 130, err
    assert "--resume" in err and "Traceback" not in err, err
    info = json.loads((d / "run.json").read_text())
    assert info["status"] == "interrupted"
    assert len(pd.read_parquet(d / "candidates.parquet")) == len(_journal_rows(d))


def _spawned_workers(pid: int) -> list[int]:
    """The run's pool workers that exist (a spawned worker's command line names ``spawn_main``)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue  # the thread ended
        for child in children:
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(int(child))
            except OSError:
                pass
    return found


def test_ctrl_c_while_workers_import_prints_only_the_one_line(tmp_path: Path) -> None:
    """A terminal's Ctrl-C reaches the whole group: a worker still importing once printed a traceback."""
    proc = _start_in_own_group(tmp_path)
    deadline = time.monotonic() + 120
    while not _spawned_workers(proc.pid):
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("no worker was started")
        time.sleep(0.01)
    time.sleep(0.1)  # inside the worker's imports (they take seconds), before its initializer
    err = _ctrl_c(proc)
    assert proc.returncode == 130, err
    # The first worker starts while `bench run` still imports (its warm-up overlaps them): the
    # signal lands either before the run exists or in it, and either way one line says which.
    runs = list((tmp_path / "results").glob("*")) if (tmp_path / "results").is_dir() else []
    if runs:
        resume = f"bench run --resume {_rel_run(tmp_path)}"
        assert err.strip().splitlines() == [f"interrupted; finish it with: {resume}"]
    else:
        assert err.strip().splitlines() == ["interrupted before the run started; nothing was created"]


def _rel_run(root: Path) -> str:
    return str(_single_run_dir(root).relative_to(root))
