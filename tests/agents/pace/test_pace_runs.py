"""PACE end to end through the runner on real tiny variants (offline proposer, local sandbox)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from agents.pace import PACEAgent, PACEConfig
from harness.envs.subset import SUFFIX_MARK
from harness.results.store import RunStore


def test_eplb_tiny_run_has_both_timescales_and_subset_gates(run_agent: Any) -> None:
    cfg = PACEConfig(model="offline/pacevolve", islands=3, epsilon=1.0, max_slow_attempts=1, delta=-1.0)
    agent = PACEAgent(cfg)
    out, run_dir = run_agent(agent, "eplb-tiny", 16)
    t = pd.read_parquet(run_dir / "pace.parquet")
    assert {"fast", "slow"} <= set(t["timescale"])
    assert t[t["event"] == "saturation"]["saturated"].any()
    gates = t[(t["event"] == "gate") & (t["subset"] != "")]
    # δ = -1: the gate accepts any scored candidate (unless the budget ended before its evaluations)
    ended = gates["reason"].str.contains("budget ended")
    assert (~ended).sum() >= 1 and gates[~ended]["accepted"].all()
    assert {"commit", "rollback"} & set(t["event"])
    rows = RunStore.open(run_dir, readonly=True).rows()
    subset_rows = [r for r in rows if SUFFIX_MARK in r.env_id]
    assert 2 * (~ended).sum() <= len(subset_rows) <= 2 * len(gates)  # an ended gate may have one
    expected = {f"eplb-tiny{SUFFIX_MARK}{s}" for s in gates["subset"]}
    assert {r.env_id for r in subset_rows} == expected
    full = [r.score for r in rows if SUFFIX_MARK not in r.env_id and r.score is not None]
    info = json.loads((run_dir / "run.json").read_text())
    summary = info["agent_summary"]
    assert out.evaluated == len(rows) and summary["gate_accepted"] == gates["accepted"].sum()
    assert summary["prompt_rounds"] >= 1 and summary["slow_steps"] >= 1
    [lb_file] = list((Path(run_dir).parent.parent / "lb").glob("*.parquet"))
    lb = pd.read_parquet(lb_file)
    assert float(lb["best_score"].iloc[-1]) == max(full)  # subset scores never become the run's best
    from harness.report.run_report import build_run_report

    html = build_run_report(run_dir)
    assert "PACE timescales, saturation and gate decisions" in html
    assert html.count("<td>gate</td>") == len(t[t["event"] == "gate"])
