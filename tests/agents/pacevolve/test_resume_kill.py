"""``bench run --agent pacevolve`` killed with SIGKILL mid-run, then ``--resume``: the search continues."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

N = 14
CONFIG = {"islands": 2, "freeze_period": 2, "momentum_init": 0.3, "stagnation_threshold": 0.2, "max_ideas": 3}
BENCH = [sys.executable, "-m", "evobench.cli.main"]
RUN = [
    *BENCH, "run", "--agent", "pacevolve", "--env", "eplb-tiny", "--model", "offline/pacevolve",
    "--agent-config", json.dumps(CONFIG), "--seed", "4", "--workers", "2",
    "--max-evaluations", str(N), "--no-progress",
]  # fmt: skip
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line torn by the kill
    return out


def _wait_for_rows(root: Path, n: int, proc: subprocess.Popen, timeout: float = 240) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before it could be killed"
        runs = [d for d in (root / "results").glob("*") if d.is_dir()]
        if runs and len(_lines(runs[0] / "candidates.jsonl")) >= n:
            return runs[0]
        time.sleep(0.05)
    raise AssertionError("the run made no progress")


def test_kill_9_then_resume_finishes_the_search_without_repeating_work(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        RUN, cwd=tmp_path, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        run_dir = _wait_for_rows(tmp_path, 6, proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    before = {r["seq"]: r for r in _lines(run_dir / "candidates.jsonl")}
    assert 6 <= len(before) < N
    assert (run_dir / "checkpoints" / "agent").is_file()
    checkpoint = json.loads((run_dir / "checkpoints" / "agent").read_text())
    calls_before = len(_lines(run_dir / "llm_calls.jsonl"))

    r = subprocess.run(
        [*BENCH, "run", "--resume", str(run_dir), "--no-progress"],
        cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "diverged" not in r.stderr  # the redone step proposed the same candidates
    rows = _lines(run_dir / "candidates.jsonl")
    assert sorted(x["seq"] for x in rows) == list(range(N)), "an evaluation is missing or was repeated"
    for seq, row in before.items():
        after = next(x for x in rows if x["seq"] == seq)
        assert after["finished_at"] == row["finished_at"]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    assert len(pd.read_parquet(run_dir / "candidates.parquet")) == N
    # the search went on from the checkpoint's step, and every LLM call of both sessions is in the ledger
    steps = pd.read_parquet(run_dir / "pacevolve_iterations.parquet")
    assert steps["step"].max() > checkpoint["state"]["step"]
    assert sorted(steps.loc[steps["seq"] >= 0, "seq"].unique()) == list(range(1, N))
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert len(calls) > calls_before and len(calls) == len(_lines(run_dir / "llm_calls.jsonl"))
