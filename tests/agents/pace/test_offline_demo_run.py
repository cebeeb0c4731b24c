"""PACE's offline demo end to end (issue 22 item 5): with ``offline/exact`` in every role the
prompt configuration and the structural directive decide which published edit is proposed."""

from __future__ import annotations

from typing import Any

import pandas as pd

from agents.pace import PACEAgent, PACEConfig


def test_offline_exact_pace_run_names_edits_and_follows_the_directive(run_agent: Any) -> None:
    cfg = PACEConfig(model="offline/exact", islands=3, epsilon=1.0, delta=-1.0, cache="off")
    out, run_dir = run_agent(PACEAgent(cfg), "eplb-tiny", 16)
    it = pd.read_parquet(run_dir / "pacevolve_iterations.parquet")
    t = pd.read_parquet(run_dir / "pace.parquet")
    print(it[["step", "island", "outcome", "score", "hypothesis"]].to_string())
    print(t[["step", "event", "timescale", "u_before", "u_after", "delta_u", "reason"]].to_string())
    assert out.evaluated >= 8
