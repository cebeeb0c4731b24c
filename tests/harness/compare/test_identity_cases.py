"""Issue 23: which runs enter a comparison (identity, absent agents, budgets), one test per measured case."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.compare.anytime import CandidatesMissingError
from harness.compare.identity import (
    AmbiguousAgentError,
    UnknownAgentError,
    cfg_hash,
    resolve,
    with_identity,
)
from harness.compare.paired import compare
from harness.compare.select import Budget, BudgetPastEndError, VariantRuns, agent_curves, variant_runs
from harness.envs.manifest import Progress
from harness.results.leaderboard import load_leaderboard, summarize


def _lb(store: Any) -> pd.DataFrame:
    return with_identity(load_leaderboard(store.leaderboards, "toy"))


def _vr(
    store: Any, specs: tuple[str, ...], pool: bool = False, **kw: Any
) -> tuple[VariantRuns, tuple[str, ...]]:
    lb = _lb(store)
    variant = kw.pop("variant", "toy")
    sel = resolve(specs, lb, pool=pool)
    vr = variant_runs(
        lb,
        variant=variant,
        current_hash="h1",
        maximize=kw.pop("maximize", True),
        progress=Progress(y_init=0.0, y_target=10.0, headroom=0.0),
        units=sel.units,
        results_dir=store.results,
        **kw,
    )
    return vr, tuple(sel.units)


# -- case 1: an agent with no runs is refused, never padded with u = 0 -----------------------------


def test_unknown_agent_fails_with_a_suggestion(store: Any) -> None:
    for s in range(3):
        store.run(run_id=f"p{s}", agent="pacevolve", seed=s, scores=[1.0, 2.0])
        store.run(run_id=f"r{s}", agent="random-search", seed=s, scores=[1.0])
    with pytest.raises(UnknownAgentError, match="did you mean random-search"):
        resolve(("pacevolve", "randomsearch"), _lb(store))
    with pytest.raises(UnknownAgentError, match="has no runs here"):
        resolve(("pacevolve", "thetaevolve"), _lb(store), known_agents=("thetaevolve", "pacevolve"))


def test_agent_without_runs_on_a_variant_is_listed_and_left_out(store: Any) -> None:
    for s in range(3):
        store.run(run_id=f"a{s}", agent="A", seed=s, scores=[3.0])
        store.run(run_id=f"b{s}", agent="B", seed=s, scores=[1.0])
        store.run(run_id=f"a2{s}", agent="A", seed=s, scores=[5.0], variant="toy2")
    v1, units = _vr(store, ("A", "B"))
    v2, _ = _vr(store, ("A", "B"), variant="toy2")
    c = compare([v1, v2], units, n_resamples=200)
    assert {r.variant for r in c.paired} == {"toy"}  # no pair on toy2: B has no runs there
    assert any(n.startswith("toy2: no runs of B") for n in c.notes)
    iqm_b = next(g for g in c.aggregates if g.kind == "iqm" and g.agent_a == "B")  # B alone: its name
    assert iqm_b.n_variants == 1 and iqm_b.n_runs == 3 and iqm_b.estimate == pytest.approx(0.1)
    poi = next(g for g in c.aggregates if g.kind == "poi")
    assert poi.n_variants == 1 and poi.estimate == 1.0  # over toy only, not toy2 padded with zeros


# -- case 2: aggregates do not depend on who else is listed ---------------------------------------


def _runs(spec: dict[str, dict[int, float]], variant: str) -> VariantRuns:
    rows = [
        {"run_id": f"{variant}-{a}-{s}", "agent": a, "seed": s, "score": u * 10, "u": u, "auc": u / 2}
        for a, seeds in spec.items()
        for s, u in seeds.items()
    ]
    return VariantRuns(
        variant, "h", True, pd.DataFrame(rows, columns=["run_id", "agent", "seed", "score", "u", "auc"])
    )


_u = st.floats(0.0, 1.0, allow_nan=False).map(lambda x: round(x, 2))
_seeds = st.dictionaries(st.integers(0, 9), _u, min_size=1, max_size=6)


@settings(max_examples=25, deadline=None)
@given(
    a=st.lists(_seeds, min_size=2, max_size=2),
    b=st.lists(_seeds, min_size=2, max_size=2),
    c=st.lists(st.dictionaries(st.integers(0, 14), _u, max_size=6), min_size=2, max_size=2),
)
def test_adding_an_unrelated_agent_changes_no_figure(
    a: list[dict[int, float]], b: list[dict[int, float]], c: list[dict[int, float]]
) -> None:
    two = [_runs({"A": a[i], "B": b[i]}, f"v{i}") for i in range(2)]
    three = [_runs({"A": a[i], "B": b[i], "C": c[i]}, f"v{i}") for i in range(2)]
    x = compare(two, ("A", "B"), n_resamples=200)
    y = compare(three, ("A", "B", "C"), n_resamples=200)
    ab = [r for r in y.paired if (r.agent_a, r.agent_b) == ("A", "B")]
    assert len(ab) == len(x.paired)
    for r, q in zip(x.paired, ab, strict=True):
        for f in ("variant", "metric", "n_seeds", "n_pairs", "missing_a", "missing_b", "ci_method"):
            assert getattr(r, f) == getattr(q, f)
        for f in ("mean_a", "mean_b", "delta", "ci_lo", "ci_hi", "p_value"):
            assert getattr(r, f) == getattr(q, f) or (math.isnan(getattr(r, f)) and math.isnan(getattr(q, f)))
        # Holm adjusts over every test made: more tests can only raise an adjusted p
        assert math.isnan(r.p_holm) or q.p_holm >= r.p_holm - 1e-12
    agg = {(g.kind, g.agent_a, g.agent_b): g for g in y.aggregates}
    for g in x.aggregates:
        assert agg[(g.kind, g.agent_a, g.agent_b)] == g


# -- case 3: configuration, models and budget are part of what is compared ------------------------


def test_identity_hash_covers_config_models_and_budget() -> None:
    base = cfg_hash({"islands": 2}, {"advisor": "m"}, {"max_evaluations": 20})
    assert base != cfg_hash({"islands": 3}, {"advisor": "m"}, {"max_evaluations": 20})
    assert base != cfg_hash({"islands": 2}, {"advisor": "n"}, {"max_evaluations": 20})
    assert base != cfg_hash({"islands": 2}, {"advisor": "m"}, {"max_evaluations": 15})
    assert base == cfg_hash({"islands": 2}, {"advisor": "m"}, {"max_evaluations": 20})


def test_other_config_neither_replaces_nor_pools_silently(store: Any) -> None:
    for s in range(3):
        store.run(run_id=f"a{s}", agent="A", seed=s, scores=[1.0, 4.0], budget={"max_evaluations": 20})
        store.run(run_id=f"b{s}", agent="B", seed=s, scores=[1.0])
    # a later run of seed 0 with another budget must not replace the 20-evaluation run
    store.run(
        run_id="a0-short",
        agent="A",
        seed=0,
        scores=[9.0],
        budget={"max_evaluations": 15},
        finished_at="2026-03-01T00:00:00+00:00",
    )
    with pytest.raises(AmbiguousAgentError, match="covers 2 identities.*max_evaluations=15"):
        resolve(("A", "B"), _lb(store))
    lb = _lb(store)
    long_id = lb.loc[lb["run_id"] == "a0", "identity"].iloc[0]
    vr, units = _vr(store, (f"{long_id}=A20", "B"))
    assert units[0] == "A20" and "a0" in set(vr.runs["run_id"]) and "a0-short" not in set(vr.runs["run_id"])
    # two configurations of one agent can be compared with each other
    short_id = lb.loc[lb["run_id"] == "a0-short", "identity"].iloc[0]
    vr2, units2 = _vr(store, (long_id, short_id))
    c = compare([vr2], units2, n_resamples=100)
    assert next(r for r in c.paired if r.metric == "u").n_seeds == 3
    pooled, _ = _vr(store, ("A", "B"), pool=True)
    assert pooled.runs.loc[pooled.runs["agent"] == "A", "run_id"].tolist().count("a0-short") == 1
    assert any("older run(s) ignored" in n for n in pooled.notes)  # seed 0: the newest of the pool


def test_leaderboard_groups_by_identity_and_counts_a_seed_once(store: Any) -> None:
    for s in range(2):
        store.run(run_id=f"a{s}", agent="pacevolve", seed=s, scores=[2.0], config={"islands": 2})
        store.run(run_id=f"p{s}", agent="pacevolve++", seed=s, scores=[3.0])
    store.run(run_id="a0-b", agent="pacevolve", seed=0, scores=[4.0], config={"islands": 2})
    store.run(run_id="c0", agent="pacevolve", seed=0, scores=[8.0], config={"islands": 4})
    s = summarize(load_leaderboard(store.leaderboards, "toy"))
    assert len(s) == 3 and s["identity"].is_unique
    two = s[s["identity"] == f"pacevolve@{cfg_hash({'islands': 2}, {}, {})}"].iloc[0]
    assert two["runs"] == 2 and two["older_duplicates"] == 1 and two["seeds"] == 2


# -- case 6: budgets are checked ------------------------------------------------------------------


def test_budget_past_the_end_of_a_run_is_refused(store: Any) -> None:
    for s in range(2):
        store.run(run_id=f"a{s}", agent="A", seed=s, scores=[1.0, 2.0, 3.0], seconds_per_eval=2.0)
        store.run(run_id=f"b{s}", agent="B", seed=s, scores=[1.0, 1.5, 2.0], seconds_per_eval=2.0)
    with pytest.raises(
        BudgetPastEndError, match=r"a0 \(3 evaluations\).*largest budget every run reached is 3"
    ):
        _vr(store, ("A", "B"), budget=Budget(evaluations=100))
    with pytest.raises(BudgetPastEndError, match="recorded no LLM cost"):
        _vr(store, ("A", "B"), budget=Budget(cost_usd=5.0))
    with pytest.raises(BudgetPastEndError, match="6 s"):
        _vr(store, ("A", "B"), budget=Budget(wall_s=10.0))


def test_wall_time_auc_covers_the_wall_time_window(store: Any) -> None:
    store.run(run_id="a0", agent="A", seed=0, scores=[None, 5.0, 10.0], seconds_per_eval=2.0)
    store.run(run_id="b0", agent="B", seed=0, scores=[1.0, 1.0, 1.0], seconds_per_eval=2.0)
    vr, _ = _vr(store, ("A", "B"), budget=Budget(wall_s=4.0))
    a = vr.runs.set_index("run_id")
    # A: u = 0 until its 2nd evaluation finishes at 4 s, so nothing over [0, 4]; B: u = .1 from 2 s
    assert a.loc["a0", "auc"] == 0.0 and a.loc["b0", "auc"] == pytest.approx(0.1 * 2 / 4)
    assert a.loc["a0", "score"] == 5.0  # the best finished within 4 s
    full, _ = _vr(store, ("A", "B"), budget=Budget(wall_s=6.0))
    assert full.runs.set_index("run_id").loc["a0", "auc"] == pytest.approx(0.5 * 2 / 6)


def test_final_auc_spans_each_runs_own_budget(store: Any) -> None:
    store.run(run_id="a0", agent="A", seed=0, scores=[2.0, 4.0], budget={"max_evaluations": 4})
    store.run(run_id="b0", agent="B", seed=0, scores=[1.0] * 8)
    vr, _ = _vr(store, ("A", "B"))
    auc = vr.runs.set_index("run_id")["auc"]
    assert auc["a0"] == pytest.approx((0.2 + 0.4 + 0.4 + 0.4) / 4)  # stopped at 2 of 4: final carried
    assert auc["b0"] == pytest.approx(0.1)  # its own 8 evaluations, not anyone else's horizon


def test_a_run_without_candidates_loses_only_its_own_auc(store: Any) -> None:
    for s in range(3):
        store.run(run_id=f"a{s}", agent="A", seed=s, scores=[2.0])
        store.run(run_id=f"b{s}", agent="B", seed=s, scores=[1.0])
    (store.results / "b2" / "candidates.parquet").unlink()
    vr, units = _vr(store, ("A", "B"))
    auc = vr.runs.set_index("run_id")["auc"]
    assert math.isnan(auc["b2"]) and auc.drop("b2").notna().all()
    c = compare([vr], units, n_resamples=100)
    row = next(r for r in c.paired if r.metric == "auc")
    assert row.n_pairs == 2 and row.n_seeds == 3 and row.delta == pytest.approx(0.1)
    assert any("b2: no AUC" in n for n in vr.notes)
    assert np.isfinite([g.estimate for g in c.aggregates]).all()


def test_a_damaged_candidates_file_is_skipped_with_the_repair_command(store: Any) -> None:
    """One unreadable snapshot once failed compare, plot and report for the whole variant."""
    for s in range(3):
        store.run(run_id=f"a{s}", agent="A", seed=s, scores=[2.0])
        store.run(run_id=f"b{s}", agent="B", seed=s, scores=[1.0])
    (store.results / "b2" / "candidates.parquet").write_bytes(b"not parquet at all")
    vr, units = _vr(store, ("A", "B"))
    runs = vr.runs.set_index("run_id")
    assert bool(runs["auc"].isna()["b2"]) and runs["auc"].drop("b2").notna().all()
    assert runs.loc["b2", "score"] == 1.0  # the leaderboard's final score stays
    note = next(n for n in vr.notes if "damaged" in n)
    assert "b2 (" in note and f"bench repair {store.results / 'b2'}" in note and "a0" not in note
    with pytest.raises(CandidatesMissingError, match="bench repair"):
        _vr(store, ("A", "B"), budget=Budget(evaluations=1))
    curves, notes, _ = agent_curves(
        _lb(store), variant="toy", current_hash="h1", maximize=True, units=None, results_dir=store.results
    )
    plotted = {str(r) for c in curves.values() for r in c["run_id"].unique()}
    assert plotted == {"a0", "a1", "a2", "b0", "b1"}
    assert any("bench repair" in n and "not plotted" in n for n in notes)


# -- hypothesis: name resolution and grouping ------------------------------------------------------

_name = st.text("abcdefghij-+", min_size=3, max_size=10).filter(lambda s: s[0].isalpha() and "@" not in s)


def _rows(runs: list[tuple[str, int, int]]) -> pd.DataFrame:
    """Leaderboard-like rows from (agent, config value, seed)."""
    return pd.DataFrame(
        [
            {
                "run_id": f"r{i}",
                "variant": "toy",
                "agent": a,
                "seed": s,
                "agent_config_json": f'{{"k": {k}}}',
                "models_json": "{}",
                "budget_json": "{}",
                "best_score": 1.0,
                "progress": 0.5,
                "direction": "maximize",
                "finished_at": f"2026-01-01T00:00:{i % 60:02d}+00:00",
                "n_infra_error": 0,
                "cost_usd": 0.0,
            }
            for i, (a, k, s) in enumerate(runs)
        ]
    )


@settings(max_examples=40, deadline=None)
@given(
    names=st.lists(_name, min_size=1, max_size=5, unique=True), which=st.integers(0, 4), cut=st.integers(0, 9)
)
def test_a_misspelt_agent_fails_and_suggests_the_real_one(names: list[str], which: int, cut: int) -> None:
    real = names[which % len(names)]
    typo = real[: cut % len(real)] + real[cut % len(real) + 1 :]  # one character dropped
    df = with_identity(_rows([(n, 0, 0) for n in names]))
    if typo in names:
        return
    with pytest.raises(UnknownAgentError) as e:
        resolve((names[0], typo), df)
    if len(real) >= 5:  # short names may be closer to another name than to their own typo
        assert "did you mean" in str(e.value)


@settings(max_examples=40, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(["a", "b", "a+"]), st.integers(0, 2), st.integers(0, 3)),
        min_size=1,
        max_size=20,
    )
)
def test_grouping_is_by_identity_one_run_per_seed(runs: list[tuple[str, int, int]]) -> None:
    s = summarize(_rows(runs))
    assert sorted(s["identity"]) == sorted({f"{a}@{cfg_hash({'k': k}, {}, {})}" for a, k, _ in runs})
    for r in s.itertuples():
        mine = [x for x in runs if f"{x[0]}@{cfg_hash({'k': x[1]}, {}, {})}" == r.identity]
        assert r.runs == len({x[2] for x in mine}) and r.older_duplicates == len(mine) - r.runs
