"""``bench sweep`` as a user runs it: real processes, sandboxes and scorers.

The issue's demonstration: a 2 agents x 2 variants x 3 seeds grid killed with SIGKILL after its
first run finished, resumed to exactly 12 runs, and compared.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

BENCH = [sys.executable, "-m", "evobench.cli.main"]
GRID = [
    "--agents", "random-search,pacevolve", "--model", "offline/pacevolve",
    "--envs", "selftest-tiny,selftest-bandit", "--seeds", "1-3",
    "--max-evaluations", "2", "--concurrency", "1",
]  # fmt: skip


def _cells(sweep: Path) -> list[dict[str, Any]]:
    try:
        return list(json.loads((sweep / "sweep.json").read_text())["cells"])
    except (OSError, ValueError):  # not written yet (it is replaced atomically, never torn)
        return []


@pytest.mark.run
def test_sweep_survives_kill_9_and_resumes_to_exactly_the_grid(tmp_path: Path) -> None:
    sweep = tmp_path / "sw"
    first = subprocess.Popen(
        [*BENCH, "sweep", *GRID, "--out", str(sweep), "--no-progress", "--no-report"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not any(c["state"] == "finished" for c in _cells(sweep)):
        assert first.poll() is None, first.communicate()[0]
        assert time.monotonic() < deadline, "no run finished within 120 s"
        time.sleep(0.02)
    os.kill(first.pid, signal.SIGKILL)  # no handler runs: the manifest and runs are as the kill left them
    first.communicate()
    at_kill = _cells(sweep)
    assert sum(c["state"] == "finished" for c in at_kill) < 12  # something was left to resume

    r = subprocess.run(
        [*BENCH, "sweep", "--resume", str(sweep), "--no-progress", "--no-report"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    cells = _cells(sweep)
    assert len(cells) == 12 and all(c["state"] == "finished" for c in cells)
    # a run started before the kill is the same run after it (its id was recorded before its directory)
    for before, after in zip(at_kill, cells, strict=True):
        assert before["run_id"] in (None, after["run_id"])
    runs = sorted(p.name for p in (sweep / "runs").iterdir())
    assert runs == sorted(c["run_id"] for c in cells)
    spans = []
    for run in runs:
        info = json.loads((sweep / "runs" / run / "run.json").read_text())
        assert info["status"] == "finished" and info["n_evaluations"] == 2
        spans.append((info["started_at"], info["ended_at"]))
    # runs overlapped in time (two at a time over --concurrency 1: one sandbox worker for the grid)
    assert any(a0 < b1 and b0 < a1 for i, (a0, a1) in enumerate(spans) for b0, b1 in spans[i + 1 :])
    rows = pd.concat([pd.read_parquet(p) for p in (sweep / "leaderboards").glob("*.parquet")])
    assert len(rows) == 12 and sorted(rows["run_id"]) == runs
    grid = {
        (a, v, s)
        for a in ("random-search", "pacevolve")
        for v in ("selftest-tiny", "selftest-bandit")
        for s in (1, 2, 3)
    }
    assert set(zip(rows["agent"], rows["variant"], rows["seed"], strict=True)) == grid  # no seed twice
    assert "compare: random-search, pacevolve on selftest-tiny, selftest-bandit" in r.stdout
    assert "A − B per seed" in r.stdout and "selftest-bandit" in r.stdout


def test_resume_refuses_grid_flags_and_unknown_ids_create_nothing(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from evobench.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["sweep", "--resume", "sw", "--seeds", "4"]) == 2
    assert "--resume sw continues the sweep as recorded; drop --seeds" in capfd.readouterr().err
    bad = ["--agents", "random-serch", "--envs", "selftest-tiny", "--seeds", "1", "--out", "sw"]
    assert main(["sweep", *bad]) == 2
    err = capfd.readouterr().err
    assert err.count("\n") == 1
    assert "command line: agents[0].agent: unknown agent 'random-serch'; did you mean: random-search?" in err
    assert not (tmp_path / "sw").exists()
