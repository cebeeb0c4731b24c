import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agents.learning.puct import SCALE_FLOOR, FlushResult, PUCTArchive

SQRT7 = math.sqrt(7.0)


def hand_tree() -> PUCTArchive:
    """Seed s; children a, b; grandchildren g, h under a; 6 rollouts (2 failed).

    s(0.0, seed) ── a(1.0) ── g(3.0)
                 │        └── h(0.5)
                 └── b(2.0)
    """
    arc = PUCTArchive(c=1.0, children_per_parent=2, capacity=1000)
    arc.add_seed("s", 0.0)
    arc.record("s", "a", 1.0)  # s.n=1 T=1 m(s)=1
    arc.record("s", "b", 2.0)  # s.n=2 T=2 m(s)=2
    arc.record("s", None, None)  # failed: s.n=3 T=3
    assert arc.flush().inserted == ("a", "b")
    arc.record("a", "g", 3.0)  # a.n=1 s.n=4 T=4 m(a)=3
    arc.record("a", "h", 0.5)  # a.n=2 s.n=5 T=5 m(a)=max(3, 0.5)=3 (the mean would be 1.75)
    assert arc.flush().inserted == ("g", "h")
    arc.record("g", "x", None)  # failed (no reward): g.n=1 a.n=3 s.n=6 T=6
    return arc


def test_hand_tree_counts_and_best_child() -> None:
    arc = hand_tree()
    assert arc.T == 6 and len(arc) == 5
    assert arc.keys() == ["s", "a", "b", "g", "h"]
    visits = {k: arc[k].visits for k in arc.keys()}
    assert visits == {"s": 6, "a": 3, "b": 0, "g": 1, "h": 0}
    best = {k: arc[k].best_child for k in arc.keys()}
    assert best == {"s": 2.0, "a": 3.0, "b": None, "g": None, "h": None}
    assert arc["g"].parent == "a" and arc["s"].parent is None and arc["s"].seed
    assert not arc.pending  # the failed rollout staged nothing


def test_hand_tree_prior_scale_and_scores() -> None:
    arc = hand_tree()
    # Ranks by reward desc: g(3)=0, b(2)=1, a(1)=2, h(0.5)=3, s(0)=4; |H|=5, sum(5-rank)=5+4+3+2+1=15.
    assert [arc.prior(k) for k in ("g", "b", "a", "h", "s")] == [5 / 15, 4 / 15, 3 / 15, 2 / 15, 1 / 15]
    # scale over non-seed rewards {1, 2, 3, 0.5}: 3 - 0.5 = 2.5 (the seed's 0.0 is excluded).
    assert arc.scale == 2.5
    # score = Q + c * 2.5 * P * sqrt(1 + 6) / (1 + n)
    expected = {
        "s": 2.0 + 2.5 * (1 / 15) * SQRT7 / 7,  # Q = m(s) = 2; n = 6          ~= 2.063
        "a": 3.0 + 2.5 * (3 / 15) * SQRT7 / 4,  # Q = m(a) = 3 (max, not mean); n = 3  ~= 3.331
        "b": 2.0 + 2.5 * (4 / 15) * SQRT7 / 1,  # never expanded: Q = R(b) = 2   ~= 3.764
        "g": 3.0 + 2.5 * (5 / 15) * SQRT7 / 2,  # only a failed rollout: Q = R(g) = 3  ~= 4.102
        "h": 0.5 + 2.5 * (2 / 15) * SQRT7 / 1,  # ~= 1.382
    }
    for key, value in expected.items():
        assert arc.score(key) == pytest.approx(value, rel=1e-12, abs=0.0), key


def test_q_is_best_child_even_below_own_reward_and_c_zero_is_greedy() -> None:
    arc = PUCTArchive(c=0.0)
    arc.add_seed("s", 5.0)
    arc.record("s", "a", 1.0)
    arc.record("s", "b", 4.0)
    assert arc.score("s") == 4.0  # Q(s) = m(s) = max child reward, not R(s) = 5
    arc.flush()
    assert arc.score("a") == 1.0 and arc.score("b") == 4.0


def test_scale_floor_and_seed_exclusion() -> None:
    arc = PUCTArchive()
    arc.add_seed("s", 100.0)
    assert arc.scale == SCALE_FLOOR  # no non-seed state
    arc.record("s", "a", 1.0)
    arc.flush()
    assert arc.scale == SCALE_FLOOR  # one non-seed state: range 0
    arc.record("s", "b", 1.0)
    arc.flush()
    assert arc.scale == SCALE_FLOOR  # two equal rewards: range 0
    arc.record("a", "c", 3.0)
    arc.flush()
    assert arc.scale == 2.0  # seed's 100 ignored: 3 - 1


def test_select_order_lineage_blocking_and_repeats() -> None:
    arc = hand_tree()
    # Score order: g 4.102 > b 3.764 > a 3.331 > s 2.063 > h 1.382.
    # g blocks its ancestors a and s; b (sibling subtree of a) is free; h is neither an ancestor
    # nor a descendant of g or b, so it is free too.
    assert arc.select(5) == ["g", "b", "h"]
    assert arc.select(2) == ["g", "b"]
    assert arc.select(1) == ["g"]
    assert arc.select(7, allow_repeats=True) == ["g", "b", "h", "g", "b", "h", "g"]
    assert arc.select(2, allow_repeats=True) == ["g", "b"]
    assert arc.select(5) == arc.select(5)  # pure: selecting changes nothing


def test_choosing_a_root_blocks_all_its_descendants() -> None:
    arc = PUCTArchive(c=0.0)
    arc.add_seed("s", 0.0)
    arc.add_seed("t", -1.0)
    arc.record("s", "a", 10.0)  # Q(s) = 10 beats everything once a is in
    arc.flush()
    arc.record("a", "b", 1.0)
    arc.record("a", "c", 2.0)
    arc.flush()
    # c=0 so score = Q: s=m(s)=10, a=m(a)=2, b=1, c=2, t=-1; a precedes c on reward (10 > 2).
    assert [arc.score(k) for k in ("s", "a", "b", "c", "t")] == [10.0, 2.0, 1.0, 2.0, -1.0]
    assert arc.select(5) == ["s", "t"]  # s blocks a, b, c (all descendants); t is another tree
    assert arc.select(3, allow_repeats=True) == ["s", "t", "s"]


def test_ties_are_broken_deterministically() -> None:
    arc = PUCTArchive(c=0.0)
    for key in ("z", "y", "x"):
        arc.add_seed(key, 1.0)
    # Equal score and reward: first-seen order; ranks follow the same order.
    assert arc.select(3) == ["z", "y", "x"]
    assert [arc.prior(k) for k in ("z", "y", "x")] == [3 / 6, 2 / 6, 1 / 6]


def test_flush_keeps_top_children_per_parent_with_first_staged_ties() -> None:
    arc = PUCTArchive(children_per_parent=2)
    arc.add_seed("s", 0.0)
    arc.add_seed("t", 0.0)
    for key, reward in (("c1", 1.0), ("c2", 4.0), ("c3", 3.0), ("c4", 4.0), ("c5", 4.0)):
        arc.record("s", key, reward)
    arc.record("t", "d1", -5.0)
    result = arc.flush()
    # s keeps c2 and c4 (4.0, first two staged of three ties); t keeps its only child.
    assert result.inserted == ("c2", "c4", "d1") and result.evicted == ()
    assert set(arc.keys()) == {"s", "t", "c2", "c4", "d1"}
    assert arc["s"].best_child == 4.0 and arc["t"].best_child == -5.0
    assert not arc.pending
    # Dropped children were never archived, so they may be staged again.
    arc.record("c2", "c1", 2.0)
    assert "c1" in arc.pending


def test_top_children_rule_ranks_all_of_a_parents_children_across_steps() -> None:
    """Issue 22 item 4: 0.70 and 0.705 arriving a step after 0.60 and 0.65 replace them."""
    arc = PUCTArchive(children_per_parent=2)
    arc.add_seed("s", 0.5)
    arc.record("s", "a", 0.60)
    arc.record("s", "b", 0.65)
    arc.flush()
    arc.record("a", "g", 0.9)  # a has a descendant: displacing a keeps the lineage via a tombstone
    arc.record("s", "c", 0.70)
    arc.record("s", "d", 0.705)
    arc.record("s", "e", 0.62)
    result = arc.flush()
    assert result.inserted == ("g", "c", "d") and result.displaced == ("a", "b")
    assert set(arc.keys()) == {"s", "c", "d", "g"} and arc.evicted == {"a": "s", "b": "s"}
    assert list(arc._ancestors("g")) == ["a", "s"]
    arc.record("s", "f", 0.1)  # worse than both kept children: never enters
    assert arc.flush() == FlushResult(inserted=(), evicted=(), displaced=())


def test_duplicate_children_are_staged_once_with_their_best_reward() -> None:
    arc = PUCTArchive()
    arc.add_seed("s", 0.0)
    arc.record("s", "a", 1.0)
    arc.flush()
    arc.record("s", "x", 1.0)
    arc.record("s", "x", 3.0)  # better: reward 3
    arc.record("a", "x", 5.0)  # better, from another parent: moves to a
    arc.record("s", "x", 5.0)  # tie: the first stays
    arc.record("s", "x", 0.0)  # worse: ignored
    assert len(arc.pending) == 1
    assert (arc.pending["x"].parent, arc.pending["x"].reward) == ("a", 5.0)
    arc.record("a", "s", 9.0)  # already archived: counted, not staged
    assert "s" not in arc.pending and arc["a"].best_child == 9.0 and arc.T == 7
    arc.flush()
    assert arc["x"].parent == "a" and arc["x"].reward == 5.0
    arc.record("a", "x", 7.0)  # a live key: never staged again
    assert not arc.pending


def test_eviction_spares_seeds_and_keeps_ancestor_walks() -> None:
    arc = PUCTArchive(capacity=3)
    arc.add_seed("s", 0.0)
    arc.record("s", "a", 1.0)
    arc.record("s", "b", 5.0)
    assert arc.flush().evicted == ()
    arc.record("a", "g", 9.0)  # s.n = 3
    result = arc.flush()
    assert result.inserted == ("g",) and result.evicted == ("a",)  # 4 > 3: lowest non-seed reward
    assert arc.get("a") is None and "a" not in arc and arc.evicted == {"a": "s"}
    arc.record("g", None, None)  # walks g -> a (tombstone) -> s
    assert (arc["g"].visits, arc["s"].visits, arc.T) == (1, 4, 4)
    # Lineage blocking also passes through the evicted a: g and s are one lineage.
    # T=4, scale = 9 - 5 = 4, ranks g0 b1 s2 (sum 6):
    #   g = 9 + 4 * (3/6) * sqrt(5) / 2 ~= 11.24; b = 5 + 4 * (2/6) * sqrt(5) ~= 7.98;
    #   s = m(s) = 5 + 4 * (1/6) * sqrt(5) / 5 ~= 5.30.
    # Choosing g blocks s only through the tombstone of a; a walk stopping there would add s.
    assert arc.score("g") == pytest.approx(9 + math.sqrt(5), rel=1e-12)
    assert arc.select(3) == ["g", "b"]
    with pytest.raises(KeyError, match="evicted"):
        arc.record("a", "z", 1.0)
    arc.record("b", "a", 100.0)  # an evicted key is never re-staged (no cycles through tombstones)
    assert not arc.pending


def test_capacity_never_evicts_seeds_and_ties_evict_newest() -> None:
    arc = PUCTArchive(capacity=1)
    arc.add_seed("s", 0.0)
    arc.add_seed("t", -10.0)
    arc.record("s", "a", 50.0)
    arc.record("t", "b", 50.0)
    assert arc.flush().evicted == ("b", "a")  # equal rewards: newest first; seeds stay over capacity
    assert arc.keys() == ["s", "t"]
    arc2 = PUCTArchive(capacity=3)
    arc2.add_seed("s", 0.0)
    for key in ("a", "b", "c"):
        arc2.record("s", key, 1.0)
    assert arc2.flush().evicted == ()  # children_per_parent = 2 dropped c before the cap
    arc2.record("a", "d", 1.0)
    assert arc2.flush().evicted == ("d",)


def test_add_seed_rules() -> None:
    arc = PUCTArchive()
    arc.add_seed("s", 1.0)
    arc.add_seed("s", 7.0)  # known seed: ignored
    assert arc["s"].reward == 1.0 and len(arc) == 1
    arc.record("s", "a", 2.0)
    with pytest.raises(ValueError, match="non-seed"):
        arc.add_seed("a", 2.0)  # staged
    arc.flush()
    with pytest.raises(ValueError, match="non-seed"):
        arc.add_seed("a", 2.0)  # live


@pytest.mark.parametrize(
    "kwargs",
    [
        {"c": -0.1},
        {"c": math.inf},
        {"c": math.nan},
        {"c": 1e101},
        {"c": "1"},
        {"children_per_parent": 0},
        {"children_per_parent": 1.5},
        {"capacity": 0},
        {"capacity": True},
        {"bogus": 1},
    ],
)
def test_bad_settings_raise_value_error(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        PUCTArchive(**kwargs)  # type: ignore[arg-type]


def test_bad_calls_raise_clear_errors_without_side_effects() -> None:
    arc = PUCTArchive()
    with pytest.raises(ValueError, match="empty"):
        arc.select(1)
    arc.add_seed("s", 0.0)
    for reward in (math.nan, math.inf, -math.inf, 1e101):
        with pytest.raises(ValueError, match="finite"):
            arc.record("s", "a", reward)
        with pytest.raises(ValueError, match="finite"):
            arc.add_seed("q", reward)
    for bad in ("1.0", True):
        with pytest.raises(TypeError):
            arc.record("s", "a", bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty"):
        arc.record("s", "", 1.0)
    with pytest.raises(ValueError, match="non-empty"):
        arc.add_seed("", 1.0)
    assert (arc.T, arc["s"].visits, arc["s"].best_child, len(arc)) == (0, 0, None, 1)
    with pytest.raises(KeyError, match="unknown"):
        arc.record("nope", "a", 1.0)
    arc.record("s", "a", 1.0)
    with pytest.raises(KeyError, match="staged until flush"):
        arc.record("a", "b", 1.0)
    with pytest.raises(KeyError):
        arc.score("a")
    with pytest.raises(KeyError):
        arc.prior("a")
    with pytest.raises(ValueError, match=">= 1"):
        arc.select(0)
    with pytest.raises(TypeError):
        arc.select(1.0)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        arc["s"].visits = 3  # type: ignore[misc]  # states are immutable snapshots


def _mutated(arc: PUCTArchive, edit: Callable[[dict[str, Any]], None]) -> str:
    data = json.loads(arc.to_json())
    edit(data)
    return json.dumps(data)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["states"]["a"].update(parent="ghost"),  # dangling parent
        lambda d: d["states"]["s"].update(parent="a", seed=False),  # cycle s -> a -> s
        lambda d: d["states"]["a"].update(parent=None),  # non-seed without parent
        lambda d: d["evicted"].update(a="s"),  # a key both live and evicted
        lambda d: d["states"]["a"].update(order=0),  # duplicate order
        lambda d: d.update(next_order=1),  # order not below next_order
        lambda d: d["pending"]["p"].update(parent="gone"),  # pending child of unknown parent
        lambda d: d["states"]["a"].update(reward=math.nan),  # json.dumps writes NaN
        lambda d: d["states"]["a"].update(best_child=-math.inf),
        lambda d: d["states"]["a"].update(reward="1.0"),  # strict types
        lambda d: d["states"]["a"].update(visits=-1),
        lambda d: d.update(rollouts=-1),
        lambda d: d.update(extra=1),
    ],
)
def test_from_json_rejects_inconsistent_checkpoints(edit: Callable[[dict[str, Any]], None]) -> None:
    arc = PUCTArchive()
    arc.add_seed("s", 0.0)
    arc.record("s", "a", 1.0)
    arc.flush()
    arc.record("a", "p", 2.0)
    assert PUCTArchive.from_json(arc.to_json()) == arc
    with pytest.raises(ValueError):
        PUCTArchive.from_json(_mutated(arc, edit))


KEYS = [f"k{i}" for i in range(30)]
REWARDS = st.floats(min_value=-1e100, max_value=1e100, allow_nan=False)
# (kind, parent pick, child key, reward): records dominate so trees grow deep and wide; small
# integer rewards make ties common; seeds get the child key and a reward (skipped if None).
OPS = st.lists(
    st.tuples(
        st.sampled_from(["record"] * 6 + ["flush"] * 2 + ["seed"]),
        st.integers(0, 50),
        st.one_of(st.none(), st.sampled_from(KEYS)),
        st.one_of(st.none(), st.integers(-3, 3).map(float), REWARDS),
    ),
    min_size=10,
    max_size=80,
)


def check_invariants(arc: PUCTArchive, records: int, oracle_best: dict[str, float]) -> None:
    assert arc.T == records
    assert sum(s.visits for s in arc.states.values() if s.seed) == records  # every walk ends at a seed
    # Nearest live ancestor of each live non-seed state, walking through tombstones.
    links = {**{k: s.parent for k, s in arc.states.items()}, **arc.evicted}
    owed: dict[str, int] = {}
    for state in arc.states.values():
        up = state.parent
        while up is not None and up not in arc.states:
            up = links[up]
        if not state.seed:
            assert up is not None
            owed[up] = owed.get(up, 0) + state.visits + 1  # its own creating rollout + its subtree
    for key, need in owed.items():
        assert arc.states[key].visits >= need, key
    for key, state in arc.states.items():
        assert state.best_child == oracle_best.get(key)
    if arc.states:
        scores = {k: arc.score(k) for k in arc.keys()}
        assert all(math.isfinite(v) for v in scores.values())
        priors = [arc.prior(k) for k in arc.keys()]
        assert math.fsum(priors) == pytest.approx(1.0, rel=1e-12)
        for k in (1, 3, 8):
            chosen = arc.select(k)
            assert 1 <= len(chosen) <= k and len(set(chosen)) == len(chosen)
            assert chosen[0] == max(arc.keys(), key=lambda x: (scores[x], arc[x].reward, -arc[x].order))
            for i, a in enumerate(chosen):
                lineage = set()
                up = links[a]
                while up is not None:
                    lineage.add(up)
                    up = links[up]
                assert not lineage & set(chosen[:i] + chosen[i + 1 :])
            assert arc.select(k, allow_repeats=True)[: len(chosen)] == chosen
            assert len(arc.select(k, allow_repeats=True)) == k


@settings(max_examples=200, deadline=None)
@given(
    ops=OPS,
    c=st.floats(0.0, 10.0),
    cpp=st.integers(1, 3),
    capacity=st.integers(1, 6),
)
def test_random_operations_keep_invariants_and_round_trip(
    ops: list[tuple], c: float, cpp: int, capacity: int
) -> None:
    arc = PUCTArchive(c=c, children_per_parent=cpp, capacity=capacity)
    records = 0
    oracle_best: dict[str, float] = {}
    arc.add_seed("root", 0.0)
    for op in ops:
        if op[0] == "seed":
            if op[2] is None or op[3] is None:
                continue
            try:
                arc.add_seed(op[2], op[3])
            except ValueError:
                assert op[2] in arc.pending or op[2] in arc.evicted or not arc[op[2]].seed
        elif op[0] == "record":
            live = arc.keys()
            parent = live[op[1] % len(live)]
            arc.record(parent, op[2], op[3])
            records += 1
            if op[2] is not None and op[3] is not None:
                oracle_best[parent] = max(oracle_best.get(parent, -math.inf), op[3])
        else:
            seeds_before = {k for k in arc.keys() if arc[k].seed}
            before = {k: v.reward for k, v in arc.states.items()}
            before.update((k, v.reward) for k, v in arc.pending.items())
            result = arc.flush()
            assert seeds_before <= set(arc.keys()) and not arc.pending
            assert len(arc) <= max(capacity, len(seeds_before))
            live_nonseed = [s.reward for s in arc.states.values() if not s.seed]
            per_parent: dict[str, list[float]] = {}
            for state in arc.states.values():
                if state.parent is not None:
                    per_parent.setdefault(state.parent, []).append(state.reward)
            assert all(len(v) <= cpp for v in per_parent.values())  # archive-wide top-k
            for key in result.displaced:  # a displaced child lost to cpp siblings at least as good
                assert key in arc.evicted and key not in arc.states
                sibs = [before[k] for k, s in arc.states.items() if s.parent == arc.evicted[key]]
                sibs += [before[k] for k in result.evicted if arc.evicted[k] == arc.evicted[key]]
                assert sum(r >= before[key] for r in sibs) >= cpp
            if result.evicted:  # evicts exactly the excess, lowest rewards first
                assert len(arc) == max(capacity, len(seeds_before))
                assert all(k in arc.evicted for k in result.evicted)
                assert all(before[k] <= r for k in result.evicted for r in live_nonseed)
        for key in list(oracle_best):
            if key not in arc.states:
                del oracle_best[key]
        check_invariants(arc, records, oracle_best)
        again = PUCTArchive.from_json(arc.to_json())
        assert again == arc and again.to_json() == arc.to_json()
        if arc.states:
            assert again.select(8) == arc.select(8)
            assert [again.score(k) for k in again.keys()] == [arc.score(k) for k in arc.keys()]
        arc = again  # keep going from the restored copy: checkpoints must be resumable


def test_archive_ranks_raw_scores_not_clamped_rewards() -> None:
    """Issue 22 item 4: below y_init every progress reward is 0, so PUCT ranked ties."""
    from types import SimpleNamespace

    from agents.learning.agent import archive_value
    from agents.learning.puct import MAX_ABS

    maximise = SimpleNamespace(progress=SimpleNamespace(y_init=0.8, y_target=1.0))
    minimise = SimpleNamespace(progress=SimpleNamespace(y_init=10.0, y_target=1.0))
    values = [archive_value(maximise, y) for y in (0.60, 0.65, 0.70, 0.705)]  # type: ignore[arg-type]
    assert values == [0.60, 0.65, 0.70, 0.705]  # all below y_init, still strictly ordered
    assert archive_value(minimise, 12.0) < archive_value(minimise, 11.0)  # type: ignore[arg-type]
    assert archive_value(maximise, None) == -MAX_ABS  # type: ignore[arg-type]
    assert archive_value(maximise, float("nan")) == -MAX_ABS  # type: ignore[arg-type]
    arc = PUCTArchive(children_per_parent=2)
    arc.add_seed("s", archive_value(maximise, 0.8))  # type: ignore[arg-type]
    for key, y in zip("abcd", (0.60, 0.65, 0.70, 0.705), strict=True):
        arc.record("s", key, archive_value(maximise, y))  # type: ignore[arg-type]
    assert arc.flush().inserted == ("c", "d")
