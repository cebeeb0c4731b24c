"""PACE's offline demo end to end (issue 22 item 5): with ``offline/exact`` in every role, the
structural directive of a control edit decides which published edit the advisor names."""

from __future__ import annotations

import json
import re
from typing import Any

import pandas as pd

from agents.pace import PACEAgent, PACEConfig

_EDIT = re.compile(r"^edit (\S+) \d+ ")


def directive_share(run_dir: Any) -> tuple[float, float, int]:
    """Share of slow-step hypotheses naming their directive's entry, the share of those same
    entries among fast-step hypotheses (the baseline), and the number of saturated rounds."""
    it = pd.read_parquet(run_dir / "pacevolve_iterations.parquet")
    t = pd.read_parquet(run_dir / "pace.parquet")
    named = it["hypothesis"].str.extract(_EDIT)[0]
    edits = t[(t["event"] == "control_edit") & (t["edit_json"].fillna("") != "")]
    targets = {
        int(r.step): json.loads(r.edit_json)["directive"].rsplit(" ", 1)[-1].rstrip(".")
        for r in edits.itertuples()
    }
    slow = it["step"].isin(list(targets))
    fast_named = named[~slow]
    hits, base = [], []
    for i, s in it.loc[slow, "step"].items():
        hits.append(named[i] == targets[int(s)])
        base.append(float((fast_named == targets[int(s)]).mean()) if len(fast_named) else 0.0)
    sat = int(t[t["event"] == "saturation"]["saturated"].sum())
    return sum(hits) / max(1, len(hits)), sum(base) / max(1, len(base)), sat


def test_offline_exact_pace_run_names_edits_and_follows_the_directive(run_agent: Any) -> None:
    cfg = PACEConfig(model="offline/exact", islands=3, epsilon=0.01, delta=-1.0, cache="off")
    out, run_dir = run_agent(PACEAgent(cfg), "eplb-tiny", 24)
    it = pd.read_parquet(run_dir / "pacevolve_iterations.parquet")
    assert it["hypothesis"].str.match(_EDIT).all()  # every experiment names a published edit
    assert (it["outcome"] == "evaluated").sum() >= 6
    slow_share, fast_share, _ = directive_share(run_dir)
    assert slow_share > fast_share and slow_share >= 0.5
