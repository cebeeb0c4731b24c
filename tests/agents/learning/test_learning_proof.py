"""Trained vs frozen advisor through ``bench compare``: the CI-sized version of
``benchmarks/bench_learning_proof.py`` (pacevolve++ on ``selftest-bandit-8``, six seeds a side).

The frozen arm is the same configuration with ``lr = 0``. Real ``bench run`` processes write a
scratch leaderboard; ``bench compare`` pairs the two identities by seed. Six seeds are the fewest for
which the exact sign-flip test can reach p < 0.05 (the smallest two-sided p-value is 2 / 2**6).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SEEDS = 6


def _proof() -> types.ModuleType:
    path = ROOT / "benchmarks" / "bench_learning_proof.py"
    spec = importlib.util.spec_from_file_location("evobench_learning_proof", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_trained_advisor_beats_its_frozen_self_in_bench_compare(tmp_path: Path) -> None:
    proof = _proof()
    args = proof.parser().parse_args(
        ["--presets", "pacevolve++", "--seeds", str(SEEDS), "--max-evaluations", "129", "--resamples", "2000"]
    )
    assert isinstance(args, argparse.Namespace)
    report = proof.prove(args, tmp_path)["pacevolve++"]
    print(report["table"])
    paired = [r for r in report["json"]["paired"] if r["agent_a"].endswith("trained")]
    by_metric = {r["metric"]: r for r in paired}
    assert {"u", "auc"} <= set(by_metric), by_metric.keys()
    for r in by_metric.values():
        assert r["n_pairs"] == SEEDS  # every seed ran on both sides
    wins = [m for m in ("u", "auc") if by_metric[m]["delta"] > 0 and by_metric[m]["p_value"] < 0.05]
    assert wins, {m: (by_metric[m]["delta"], by_metric[m]["p_value"]) for m in ("u", "auc")}
    (tf, tl), (ff, fl) = report["quarters"]["trained"], report["quarters"]["frozen"]
    print(f"trained {tf:.3f} -> {tl:.3f}, frozen {ff:.3f} -> {fl:.3f}")
