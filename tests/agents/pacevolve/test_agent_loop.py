"""The agent loop on an in-memory context: determinism, budget, resume from a checkpoint, failed proposals."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.pacevolve import IterationRow, PACEvolveAgent, PACEvolveConfig
from agents.pacevolve.roles import IslandView, ProposalError
from harness.runner.context import BudgetExhausted, TaskSpec

CFG: dict[str, Any] = {
    "model": "offline/pacevolve",
    "freeze_period": 2,
    "momentum_init": 0.3,
    "stagnation_threshold": 0.2,
    "max_ideas": 2,
    "max_hypotheses_per_idea": 3,
    "cache": "off",
}


def agent(**overrides: Any) -> PACEvolveAgent:
    return PACEvolveAgent(PACEvolveConfig(**(CFG | overrides)))


def run(ctx: Any, a: PACEvolveAgent | None = None) -> Any:
    try:
        (a or agent()).run(ctx)
    except BudgetExhausted:
        pass
    return ctx


@pytest.fixture
def toy(task_factory: Any) -> TaskSpec:
    return task_factory(maximize=True, y_init=0.625, y_target=1.0)


def test_offline_runs_are_deterministic_by_seed_and_use_the_budget(
    toy: TaskSpec, fake_ctx: Any, tmp_path: Path
) -> None:
    a = run(fake_ctx(toy, 16, seed=3, run_dir=tmp_path / "a"))
    b = run(fake_ctx(toy, 16, seed=3, run_dir=tmp_path / "b"))
    c = run(fake_ctx(toy, 16, seed=4, run_dir=tmp_path / "c"))
    shas = [[e.program_id for e in x.history] for x in (a, b, c)]
    assert len(shas[0]) == 16 and len(set(shas[0])) == 16  # exact budget, no program evaluated twice
    assert shas[0] == shas[1] != shas[2]
    calls = pd.read_parquet(tmp_path / "a" / "llm_calls.parquet")
    assert set(calls["kind"]) == {"offline-proposer (not an LLM)"} and set(calls["model"]) == {
        "offline/pacevolve"
    }
    assert {
        "idea_generation",
        "idea_classification",
        "idea_selection",
        "implementation",
        "idea_pruning",
    } <= set(calls["stage"])
    assert {"hypothesis_summary"} <= set(calls["stage"])
    rows = pd.read_parquet(tmp_path / "a" / "pacevolve_iterations.parquet")
    evaluated = rows[rows["seq"] >= 0]
    assert sorted(evaluated["seq"]) == list(range(1, 16))  # every candidate after the initial program
    assert rows["triggered"].any() and (rows.loc[rows["triggered"], "action"] != "").all()
    assert rows["parent_source"].str.match(r"(backtrack|crossover):\d+$").any()
    # LLM tokens are attributed to the candidates that used them
    tokens = sum(e.proposal.tokens_in for e in a.history)
    assert 0 < tokens <= calls["tokens_in"].sum()


def test_resume_from_checkpoint_repeats_the_interrupted_step(
    toy: TaskSpec, fake_ctx: Any, tmp_path: Path
) -> None:
    whole = run(fake_ctx(toy, 14, seed=5, run_dir=tmp_path / "whole"))
    steps = [e.proposal.iteration for e in whole.history]
    # kill while the second candidate of a step is being evaluated (its first one is journaled)
    crash_at = next(s for s in range(5, 14) if steps[s] == steps[s - 1])
    crashed = fake_ctx(toy, 14, seed=5, run_dir=tmp_path / "crash", crash_at=crash_at)
    with pytest.raises(KeyboardInterrupt):
        agent().run(crashed)
    assert crashed.checkpoint is not None and crashed.checkpoint["seq"] == crash_at - 1
    resumed = fake_ctx(
        toy, 14, seed=5, run_dir=tmp_path / "crash", checkpoint=crashed.checkpoint, journal=crashed.journal
    )
    run(resumed)
    assert resumed.history[0].seq == crash_at - 1
    assert [resumed.journal[s] for s in range(14)] == [e.program_id for e in whole.history]
    assert resumed.replayed == 1  # the journaled half of the interrupted step was replayed, not re-run


class BrokenAdvisor:
    """Every stage fails: each step is a failed proposal."""

    def __getattr__(self, name: str) -> Any:
        def fail(view: IslandView, *args: Any) -> Any:
            raise ProposalError(name, "model returned garbage")

        return fail


class Recorder:
    def __init__(self) -> None:
        self.steps: list[tuple[int, list[IterationRow]]] = []

    def on_step(self, step: int, rows: list[IterationRow]) -> None:
        self.steps.append((step, rows))


def test_failed_proposals_are_recorded_and_the_run_stops(
    toy: TaskSpec, fake_ctx: Any, tmp_path: Path
) -> None:
    rec = Recorder()
    a = PACEvolveAgent(
        PACEvolveConfig(**(CFG | {"max_empty_steps": 3})),
        advisor=BrokenAdvisor(),
        observers=[rec],  # type: ignore[arg-type]
    )
    ctx = run(fake_ctx(toy, 10, run_dir=tmp_path), a)
    assert len(ctx.history) == 1  # the initial program only
    assert [s for s, _ in rec.steps] == [1, 2, 3] and all(len(rows) == 2 for _, rows in rec.steps)
    rows = pd.read_parquet(tmp_path / "pacevolve_iterations.parquet")
    assert len(rows) == 6 and set(rows["outcome"]) == {"failed:idea_selection"}
    assert rows["idea_events"].str.contains("generation_failed").all()


def test_cost_caps_end_the_run_cleanly(toy: TaskSpec, fake_ctx: Any, tmp_path: Path) -> None:
    assert run(fake_ctx(toy, 50, max_cost_usd=0.0)).history == []  # the runner's budget: nothing at all
    ctx = run(fake_ctx(toy, 50, run_dir=tmp_path), agent(max_cost_usd=0.0))  # the agent's cap: no LLM call
    assert len(ctx.history) == 1 and pd.read_parquet(tmp_path / "llm_calls.parquet").empty


def test_minimised_metrics_and_the_optional_filters(task_factory: Any, fake_ctx: Any, tmp_path: Path) -> None:
    low = task_factory(maximize=False, y_init=0.375, y_target=0.0)
    ctx = run(
        fake_ctx(low, 14, seed=2, run_dir=tmp_path), agent(idea_filter=True, stagnation_counts_failures=True)
    )
    initial = ctx.history[0].result.score
    assert initial == pytest.approx(0.375)
    assert ctx.best.result.score < initial  # lower is better, and the search found lower
    rows = pd.read_parquet(tmp_path / "pacevolve_iterations.parquet")
    best = rows.groupby("step")["island_best"].min()
    assert (best.diff().dropna() <= 1e-12).all()  # island bests never get worse (lower is better)
    assert ((rows["absolute_progress"] >= 0) & (rows["absolute_progress"] <= 1)).all()
    assert (rows["relative_progress"].fillna(0) > 0).any()
    calls = pd.read_parquet(tmp_path / "llm_calls.parquet")
    assert "repetition_check" in set(calls["stage"])
