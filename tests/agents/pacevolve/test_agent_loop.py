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
    "islands": 2,
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


def test_s0_is_the_measured_initial_score_not_the_manifest_and_survives_resume(
    task_factory: Any, fake_ctx: Any, tmp_path: Path
) -> None:
    wrong = task_factory(maximize=True, y_init=0.1, y_target=1.0)  # the initial program scores 0.625
    ctx = run(fake_ctx(wrong, 10, seed=3, run_dir=tmp_path))
    state = ctx.checkpoint["state"]
    assert [isl["s0"] for isl in state["islands"]] == [pytest.approx(0.625)] * 2
    rows = pd.read_parquet(tmp_path / "pacevolve_iterations.parquet")
    assert rows["s0"].tolist() == pytest.approx([0.625] * len(rows))
    expected = ((rows["island_best"] - 0.625) / (1.0 - 0.625)).clip(0, 1)
    assert rows["absolute_progress"].to_numpy() == pytest.approx(expected.to_numpy())
    resumed = agent()
    more = fake_ctx(wrong, 14, seed=3, run_dir=tmp_path, checkpoint=ctx.checkpoint, journal=ctx.journal)
    run(more, resumed)
    assert resumed._state is not None and [i.s0 for i in resumed._state.islands] == [pytest.approx(0.625)] * 2


def test_a_failed_initial_program_leaves_s0_to_the_first_scored_one(task_factory: Any) -> None:
    from agents.pacevolve.interventions import update_and_intervene
    from agents.pacevolve.state import IslandState, SearchState

    task = task_factory(maximize=True, y_init=0.0, y_target=1.0)
    state = SearchState(base_seed=1, islands=[])
    ref = state.add_program(task.initial_program, None)
    isl = IslandState(index=0, sota=ref, best=ref)
    state.islands = [isl]
    cfg = PACEvolveConfig(model="offline/pacevolve", islands=1)
    out = update_and_intervene(state, isl, cfg, task, 1, scored=False, evaluated=True)
    assert isl.s0 is None and out.relative_progress is None and isl.completed == 0
    isl.best = state.add_program("x = 1", 0.4)
    out = update_and_intervene(state, isl, cfg, task, 2, scored=True, evaluated=True)
    assert isl.s0 == 0.4 and out.relative_progress is None and isl.completed == 0  # Alg. 2 line 2
    isl.best = state.add_program("x = 2", 0.7)
    out = update_and_intervene(state, isl, cfg, task, 3, scored=True, evaluated=True)
    assert out.relative_progress == pytest.approx(0.5) and isl.completed == 1  # (0.7-0.4)/(1-0.4)


def test_events_name_every_intervention_with_its_evaluation_count() -> None:
    from agents.pacevolve.telemetry import events_of

    base: dict[str, Any] = {"step": 7, "island": 1, "evaluations": 29, "parent_sha256": "p"}
    assert events_of(IterationRow(**base, parent_source="normal", outcome="evaluated")) == []
    row = IterationRow(
        **base,
        parent_source="backtrack:2",
        restored_step=3,
        outcome="evaluated",
        triggered=True,
        action="crossover:0",
        w_backtrack=0.25,
        w_crossover_json='{"0": 0.75}',
        summarized_idea=4,
        pruned_ids="5 6",
        evicted_ids="1",
        backtrack_ended=True,
    )
    events = events_of(row)
    assert [e.kind for e in events] == [
        "crossover", "revert", "backtrack_end", "hyp_summary", "idea_prune", "memory_evict",
    ]  # fmt: skip
    assert all(e.evaluations == 29 and e.step == 7 and e.island == 1 for e in events)
    assert events[0].detail.startswith("partner 0") and events[1].detail == "saved state 2 (after step 3)"
    bt = events_of(IterationRow(**base, parent_source="normal", outcome="evaluated", action="backtrack"))
    assert [e.kind for e in bt] == ["backtrack"]
