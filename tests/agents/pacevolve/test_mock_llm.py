"""One full step through the real-model code path, answered by litellm's ``mock_response``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest

from agents.pacevolve import PACEvolveAgent, PACEvolveConfig

# One answer that satisfies every stage's format: ideas, a "new" verdict, a selection of idea 1,
# a summary, a drop list, and a SEARCH/REPLACE edit of selftest-tiny's probe.
MOCK = """<think>Plan: answer every stage at once.</think>
**Idea 1**
Hypothesis: Return a different constant from the probe.
Reasoning: any dict of finite numbers scores.

Idea exists: no
Description: Change the constant the probe returns.
Idea ID: 1
Drop: [1]
Findings: best score 1; constants do not matter.
Repeat: no

```python
<<<<<<< SEARCH
    return {"answer": 42.0}
=======
    return {"answer": 43.0}
>>>>>>> REPLACE
```
"""
MODEL = "gemini/gemini-2.5-pro"
COST = 10 * 1.25e-6 + 20 * 1e-5  # litellm's bundled price for 10 prompt + 20 completion tokens


@pytest.fixture(autouse=True)
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)


def test_one_step_with_mocked_gemini(run_agent: Callable[..., Any]) -> None:
    config = PACEvolveConfig(model=MODEL, islands=2, litellm_params={"mock_response": MOCK})
    out, run_dir = run_agent(PACEvolveAgent(config), "selftest-tiny", 2)
    assert out.info.status == "finished" and out.info.n_evaluations == 2
    cands = pd.read_parquet(run_dir / "candidates.parquet")
    child = cands[cands["seq"] == 1].iloc[0]
    assert child["status"] == "ok" and child["iteration"] == 1 and child["thread"] == 0
    sha = child["program_sha256"]
    assert '"answer": 43.0' in next((run_dir / "programs" / sha[:2]).glob(f"{sha}.*")).read_text()
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert set(calls["model"]) == {MODEL} and set(calls["kind"]) == {"llm"} and calls["ok"].all()
    per_island = calls.groupby("thread")["stage"].apply(list).to_dict()
    for stages in per_island.values():  # generation, classification, selection, implementation
        assert stages.count("idea_generation") == 1 and stages.count("implementation") == 1
    assert calls["cost_usd"].to_numpy() == pytest.approx([COST] * len(calls))
    # island 0's spend is on its candidate; island 1 produced the same program (a duplicate, not evaluated)
    island0 = calls[calls["thread"] == 0]
    assert child["cost_usd"] == pytest.approx(island0["cost_usd"].sum())
    assert child["tokens_in"] == island0["tokens_in"].sum() == 10 * len(island0)
    rows = pd.read_parquet(run_dir / "pacevolve_iterations.parquet").sort_values("island")
    assert list(rows["outcome"]) == ["evaluated", "duplicate"] and list(rows["idea_events"]) == [
        "new:1",
        "new:1",
    ]
    info = json.loads((run_dir / "run.json").read_text())
    assert info["models"]["implementer"] == MODEL and info["agent_config"]["litellm_params"]["mock_response"]


def test_the_cost_budget_stops_a_mocked_run_cleanly(run_agent: Callable[..., Any]) -> None:
    config = PACEvolveConfig(model=MODEL, islands=1, litellm_params={"mock_response": MOCK})
    out, run_dir = run_agent(PACEvolveAgent(config), "selftest-tiny", 20, max_cost_usd=5.5 * COST)
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert out.info.status == "finished" and out.info.n_evaluations < 20
    assert len(calls) == 6 and calls["cost_usd"].sum() == pytest.approx(6 * COST)
