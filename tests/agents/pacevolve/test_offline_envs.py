"""Offline (``offline/pacevolve``, not an LLM) runs on the tiny environments via the runner and sandbox."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from agents.pacevolve import PACEvolveAgent, PACEvolveConfig
from harness.envs.registry import default_registry

CFG: dict[str, Any] = {
    "model": "offline/pacevolve",
    "islands": 2,
    "freeze_period": 2,
    "momentum_init": 0.3,
    "stagnation_threshold": 0.2,
    "max_ideas": 3,
}


def check_run(run_dir: Any, n: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Every candidate and every LLM call is recorded, and the records agree with each other."""
    info = json.loads((run_dir / "run.json").read_text())
    assert info["status"] == "finished" and info["n_evaluations"] == n
    assert info["models"] == {
        "advisor": "offline/pacevolve",
        "implementer": "offline/pacevolve",
        "summariser": "offline/pacevolve",
    }
    cands = pd.read_parquet(run_dir / "candidates.parquet")
    assert sorted(cands["seq"]) == list(range(n))
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert len(calls) == len((run_dir / "llm_calls.jsonl").read_text().splitlines()) > 0
    assert set(calls["kind"]) == {"offline-proposer (not an LLM)"} and calls["ok"].all()
    assert {"idea_generation", "idea_classification", "idea_selection", "implementation"} <= set(
        calls["stage"]
    )
    rows = pd.read_parquet(run_dir / "pacevolve_iterations.parquet")
    assert sorted(rows.loc[rows["seq"] >= 0, "seq"]) == list(range(1, n))
    merged = rows[rows["seq"] >= 0].merge(cands, on="seq", suffixes=("", "_c"))
    assert (merged["program_sha256"] == merged["program_sha256_c"]).all()
    assert (merged["island"] == merged["thread"]).all() and (merged["step"] == merged["iteration"]).all()
    assert 0 < cands["tokens_in"].sum() <= calls["tokens_in"].sum()
    assert (run_dir / "checkpoints" / "agent").is_file()
    return cands, calls, rows


def test_eplb_tiny(run_agent: Callable[..., Any]) -> None:
    out, run_dir = run_agent(PACEvolveAgent(PACEvolveConfig(**CFG)), "eplb-tiny", 12, seed=2)
    cands, _, rows = check_run(run_dir, 12)
    # most edits keep EPLB's placement valid; which ones the offline proposer draws follows its prompt,
    # which names the draw's bounds (this installation's held-out key): 5-7 of 12 scored ok here
    assert (cands["status"] == "ok").sum() >= 5 and out.info.best_score is not None
    assert out.info.best_score >= cands.loc[cands["seq"] == 0, "score"].iloc[0]
    assert rows["triggered"].any()


def test_selftest_tiny_one_island(run_agent: Callable[..., Any]) -> None:
    out, run_dir = run_agent(
        PACEvolveAgent(PACEvolveConfig(**(CFG | {"islands": 1}))), "selftest-tiny", 6, seed=1
    )
    cands, _, _ = check_run(run_dir, 6)
    assert (cands["status"] == "ok").all() and out.info.best_score == 1.0


OTHER_TINY = ["llm-sr-tiny", "multi-evolve-tiny", "ahc039-tiny", "ahc058-tiny"]


@pytest.mark.slow
@pytest.mark.parametrize("env", OTHER_TINY)
def test_other_tiny_envs(env: str, run_agent: Callable[..., Any]) -> None:
    if env not in {v.id for v in default_registry().variants()}:
        pytest.skip(f"{env} is not registered")
    out, run_dir = run_agent(PACEvolveAgent(PACEvolveConfig(**CFG)), env, 3, seed=1)
    check_run(run_dir, 3)


@pytest.mark.slow
def test_eplb_tiny_default_config_intervenes(run_agent: Callable[..., Any]) -> None:
    """Default constants only (offline proposer): MBB triggers after the freeze and the action takes effect.

    A trigger needs 7 momentum updates per island (freeze 6), about 50-57 evaluations with 8
    islands; 64 leaves room for the next step to show the effect. Which action CE draws is
    random, so either effect is accepted; the crossover mechanics are covered in test_hcm.
    """
    cfg = PACEvolveConfig(model="offline/pacevolve")
    _, run_dir = run_agent(PACEvolveAgent(cfg), "eplb-tiny", 64, seed=3)
    cands, _, rows = check_run(run_dir, 64)
    events = pd.read_parquet(run_dir / "pacevolve_events.parquet")
    trig = rows[rows["triggered"]]
    assert len(trig) > 0 and set(events["kind"]) & {"backtrack", "crossover"}
    assert (trig["momentum"] < cfg.stagnation_threshold).all() and (trig["step"] > cfg.freeze_period).all()
    assert "idea_prune" in set(events["kind"])
    effects = 0
    for _, t in trig.iterrows():
        nxt = rows[(rows["island"] == t["island"]) & (rows["step"] == t["step"] + 1)]
        if nxt.empty:
            continue  # the budget ended first
        n = nxt.iloc[0]
        if t["action"] == "backtrack":  # a revert to a saved state from before the trigger
            assert n["parent_source"].startswith("backtrack:") and 0 < n["restored_step"] <= t["step"]
        else:  # crossover: the partner's best program is the next parent
            partner = int(t["action"].split(":")[1])
            assert n["parent_source"] == t["action"]
            best = rows[(rows["island"] == partner) & (rows["step"] == t["step"])].iloc[0]["island_best"]
            parent = cands[cands["program_sha256"] == n["parent_sha256"]]
            assert parent["score"].iloc[0] == pytest.approx(best)
        effects += 1
    assert effects > 0
