from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pytest

from harness.compare.anytime import at_budget, best_so_far, progress_auc, read_candidates
from harness.compare.identity import resolve, with_identity
from harness.compare.paired import compare
from harness.compare.select import Budget, VersionMixError, variant_runs
from harness.compare.tables import comparison_csv, comparison_frame, comparison_json, frame_markdown
from harness.envs.manifest import Progress
from harness.results.leaderboard import load_leaderboard


def _vr(store: Any, agents: tuple[str, ...] = ("A", "B"), **kw: Any) -> Any:
    lb = with_identity(load_leaderboard(store.leaderboards, "toy"))
    variant = kw.pop("variant", "toy")
    sel = resolve(agents, lb[lb["variant"] == variant], pool=kw.pop("pool", False))
    return variant_runs(
        lb,
        variant=variant,
        current_hash="h1",
        maximize=kw.pop("maximize", True),
        progress=Progress(y_init=0.0, y_target=10.0, headroom=0.0),
        units={k.split("@")[0]: v for k, v in sel.units.items()},
        results_dir=store.results,
        **kw,
    )


def test_best_so_far_skips_failures_and_respects_direction(store: Any) -> None:
    store.run(run_id="r1", agent="A", seed=0, scores=[None, 2.0, 1.0, 5.0], cost_per_eval=0.5)
    store.run(run_id="r2", agent="A", seed=1, scores=[4.0, 3.0, None], maximize=False)
    t = read_candidates({"r1": store.results / "r1/candidates.parquet"}, with_times=True)
    c = best_so_far(t, maximize=True)
    assert np.isnan(c["best"].iloc[0]) and c["best"].tolist()[1:] == [2.0, 2.0, 5.0]
    assert c["evaluations"].tolist() == [1, 2, 3, 4]
    assert c["cost_usd"].tolist() == [0.5, 1.0, 1.5, 2.0]
    assert c["wall_s"].tolist() == [1.0, 2.0, 3.0, 4.0]
    m = best_so_far(read_candidates({"r2": store.results / "r2/candidates.parquet"}), maximize=False)
    assert m["best"].tolist() == [4.0, 3.0, 3.0]
    assert at_budget(c, "evaluations", 3).tolist() == [2.0]
    assert at_budget(c, "cost_usd", 0.5).isna().all()  # nothing scored within $0.5
    assert at_budget(c, "wall_s", 100).tolist() == [5.0]  # a run that stopped keeps its final best


def test_progress_auc_by_hand(store: Any) -> None:
    store.run(run_id="r1", agent="A", seed=0, scores=[None, 2.0, 1.0, 5.0])
    c = best_so_far(read_candidates({"r1": store.results / "r1/candidates.parquet"}), maximize=True)
    # u after each evaluation: 0, .2, .2, .5
    assert progress_auc(c, 0.0, 10.0, 4).iloc[0] == pytest.approx(0.9 / 4)
    assert progress_auc(c, 0.0, 10.0, 6).iloc[0] == pytest.approx(1.9 / 6)  # final u carried on
    assert progress_auc(c, 0.0, 10.0, 2).iloc[0] == pytest.approx(0.2 / 2)


def _two_agents(store: Any, n: int = 5, skip_b: tuple[int, ...] = ()) -> None:
    for s in range(n):
        store.run(run_id=f"a{s}", agent="A", seed=s, scores=[1.0, 2.0 + s, 3.0 + s])
        if s not in skip_b:
            store.run(run_id=f"b{s}", agent="B", seed=s, scores=[1.0, 1.0 + 0.5 * s])


def test_paired_comparison_exact_p_and_holm(store: Any) -> None:
    _two_agents(store)
    c = compare([_vr(store)], ("A", "B"), n_resamples=500)
    u = next(r for r in c.paired if r.metric == "u")
    # u_A = (3 + s) / 10, u_B = (1 + s / 2) / 10 -> d_s = (2 + s / 2) / 10, all positive
    assert u.delta == pytest.approx(np.mean([(2 + s / 2) / 10 for s in range(5)]))
    assert u.p_value == pytest.approx(2 / 32) and u.n_pairs == 5 and u.missing_a == u.missing_b == []
    assert u.ci_method == "BCa" and 0 < u.ci_lo <= u.delta <= u.ci_hi
    assert u.p_holm == pytest.approx(u.p_value)  # one variant, one pair: nothing to adjust
    iqm_a = next(g for g in c.aggregates if g.kind == "iqm" and g.agent_a == "A")
    assert iqm_a.estimate == pytest.approx(np.mean([0.4, 0.5, 0.6]))  # middle 50 % of .3 .. .7
    poi = next(g for g in c.aggregates if g.kind == "poi")
    assert 0.5 < poi.estimate <= 1.0


def test_missing_seed_counts_as_zero_progress_and_is_listed(store: Any) -> None:
    _two_agents(store, skip_b=(4,))
    c = compare([_vr(store)], ("A", "B"), n_resamples=300)
    u = next(r for r in c.paired if r.metric == "u")
    score = next(r for r in c.paired if r.metric == "score")
    assert u.missing_b == [4] and u.n_pairs == 5 and u.n_seeds == 5
    d = [(2 + s / 2) / 10 for s in range(4)] + [0.7 - 0.0]  # seed 4: u_A = .7, u_B = 0
    assert u.delta == pytest.approx(np.mean(d))
    assert score.n_pairs == 4 and score.missing_b == [4]  # no score to pair with
    assert any("B has no run for seed 4" in n for n in c.notes)
    assert c.runs[(c.runs["agent"] == "B") & (c.runs["seed"] == 4)].empty  # listed, not padded
    # Dropping the seed silently would have given a different answer.
    assert u.delta != pytest.approx(np.mean(d[:4]))


def test_swapping_agents_negates_every_difference(store: Any) -> None:
    _two_agents(store, skip_b=(2,))
    ab = compare([_vr(store)], ("A", "B"), n_resamples=300)
    ba = compare([_vr(store)], ("B", "A"), n_resamples=300)
    for r, q in zip(ab.paired, ba.paired, strict=True):
        assert r.metric == q.metric and r.delta == pytest.approx(-q.delta)
        assert r.p_value == pytest.approx(q.p_value) and r.missing_b == q.missing_a


def test_runs_from_other_contents_are_refused_unless_all_versions(store: Any) -> None:
    _two_agents(store, n=2)
    store.run(run_id="old", agent="A", seed=9, scores=[1.0], env_hash="h0")
    with pytest.raises(VersionMixError, match="different contents"):
        _vr(store)
    vr = _vr(store, all_versions=True)
    assert "old" in set(vr.runs["run_id"]) and any("2 content hashes" in n for n in vr.notes)


def test_duplicate_seed_keeps_latest_run_with_a_note(store: Any) -> None:
    _two_agents(store, n=2)
    store.run(run_id="a0-again", agent="A", seed=0, scores=[9.0], finished_at="2026-02-01T00:00:00+00:00")
    vr = _vr(store)
    assert vr.runs.loc[(vr.runs["agent"] == "A") & (vr.runs["seed"] == 0), "run_id"].tolist() == ["a0-again"]
    assert any("older run(s) ignored" in n for n in vr.notes)


def test_compare_at_evaluation_budget_uses_the_curves(store: Any) -> None:
    _two_agents(store, n=3)
    vr = _vr(store, budget=Budget(evaluations=1))
    assert vr.runs["score"].tolist() == [1.0] * 6  # after one evaluation everyone has the initial score
    c = compare([vr], ("A", "B"), budget="at 1 evaluations", n_resamples=200)
    u = next(r for r in c.paired if r.metric == "u")
    assert u.delta == 0.0 and u.p_value == 1.0 and u.ci_method == "degenerate"


def test_holm_across_variants(store: Any) -> None:
    for v in ("toy", "toy2"):
        for s in range(5):
            store.run(run_id=f"{v}a{s}", agent="A", seed=s, scores=[5.0 + s], variant=v)
            store.run(run_id=f"{v}b{s}", agent="B", seed=s, scores=[1.0 + s], variant=v)
    c = compare([_vr(store), _vr(store, variant="toy2")], ("A", "B"), n_resamples=200)
    u = [r for r in c.paired if r.metric == "u"]
    assert [r.p_value for r in u] == pytest.approx([2 / 32, 2 / 32])
    assert [r.p_holm for r in u] == pytest.approx([4 / 32, 4 / 32])
    assert next(g for g in c.aggregates if g.kind == "iqm").n_variants == 2


def test_exports_are_machine_readable(store: Any) -> None:
    _two_agents(store, n=3, skip_b=(1,))
    c = compare([_vr(store)], ("A", "B"), n_resamples=200)
    data = json.loads(comparison_json(c))
    assert {r["metric"] for r in data["paired"]} == {"u", "score", "auc"}
    assert next(r for r in data["paired"] if r["metric"] == "u")["missing_b"] == [1]
    csv = comparison_csv(c)
    assert csv.splitlines()[0].startswith("section,variant,metric")
    f = comparison_frame(c)
    assert set(f["section"]) == {"paired", "iqm", "poi"}
    md = frame_markdown(f.head(2))
    assert md.count("\n") == 4 and md.startswith("| section |")
    assert not math.isnan(float(f.loc[f["section"] == "iqm", "estimate"].iloc[0]))
