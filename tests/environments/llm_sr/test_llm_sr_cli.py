"""``bench`` on the LLM-SR family as a user runs it: real processes, real sandbox, real data cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.envs.registry import default_registry

REPO = Path(__file__).resolve().parents[3]
BENCH = [sys.executable, "-m", "evobench.cli.main"]
INITIAL = REPO / "environments" / "llm_sr" / "initial_program.py"
IDS = [
    "llm-sr-tiny",
    "llm-sr-phys-osc1-tiny",
    "llm-sr-osc1",
    "llm-sr-osc2",
    "llm-sr-bactgrow",
    "llm-sr-stressstrain",
]
_HF_VARS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_ENDPOINT")


def bench(*args: str, cwd: Path, data_root: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    # Never reach the real Hugging Face from a test, whatever the developer's environment holds.
    env = {**{k: v for k, v in os.environ.items() if k not in _HF_VARS}, "EVOBENCH_DATA": str(data_root)}
    return subprocess.run([*BENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.parametrize("vid", IDS)
def test_eval_initial_program(llm_sr_cache: Path, tmp_path: Path, vid: str) -> None:
    r = bench("eval", "--env", vid, str(INITIAL), "--json", cwd=tmp_path, data_root=llm_sr_cache)
    assert r.returncode == 0, r.stdout + r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "ok" and res["env_id"] == vid
    # The manifest's progress origin is the initial program's measured score.
    assert res["score"] == pytest.approx(default_registry().get(vid).progress.y_init, abs=0.01)
    assert res["metrics"]["log10_nmse_id"] == res["score"]
    print(vid, {k: round(v, 4) for k, v in res["metrics"].items()}, res["durations"])


def test_eval_without_data_names_the_fetch_command(tmp_path: Path) -> None:
    r = bench("eval", "--env", "llm-sr-osc1", str(INITIAL), cwd=tmp_path, data_root=tmp_path / "empty")
    assert r.returncode == 2
    assert "bench data fetch llm_sr" in r.stderr


def test_data_fetch_and_status_on_a_verified_cache(llm_sr_cache: Path, tmp_path: Path) -> None:
    # Every public file is present with its pinned sha256, so fetch verifies and downloads nothing;
    # the gated LLM-SRBench file needs a token, and the failure says how to get one (fetch with a
    # token: test_llm_sr_lsrbench.py).
    r = bench("data", "fetch", "llm_sr", cwd=tmp_path, data_root=llm_sr_cache)
    assert r.returncode == 1
    assert "12 files verified" in r.stdout
    out = " ".join((r.stdout + r.stderr).split())
    assert "no token is set" in out and "HF_TOKEN" in out
    assert "https://huggingface.co/datasets/nnheui/llm-srbench" in out
    r = bench("data", "status", "llm-sr", cwd=tmp_path, data_root=llm_sr_cache)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "12/12 files present" in r.stdout and "MIT" in r.stdout
    assert "lsr_bench_data.hdf5 missing" in " ".join(r.stdout.split())
