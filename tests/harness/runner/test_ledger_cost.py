"""The leaderboard's cost comes from the LLM ledger when a run has one."""

from __future__ import annotations

from pathlib import Path

from harness.llm.ledger import Ledger, LLMCallRow
from harness.runner.completion import _ledger_cost


def test_ledger_cost_sums_every_recorded_call(tmp_path: Path) -> None:
    assert _ledger_cost(tmp_path) is None
    ledger = Ledger(tmp_path)
    for i, cost in enumerate((0.25, 0.5, 0.125)):
        ledger.record(
            LLMCallRow(
                call_id=f"c{i}",
                started_at="2026-01-01T00:00:00+00:00",
                role="advisor",
                model="gemini/gemini-2.5-pro",
                cost_usd=cost,
            )
        )
    assert _ledger_cost(tmp_path) == 0.875
