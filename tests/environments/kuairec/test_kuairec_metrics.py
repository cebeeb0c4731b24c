"""Ranking metrics against a brute-force definition and hand-computed cases."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from environments.kuairec.metrics import TIE_TOLERANCE, normalise, ranking_metrics, ranks


def brute_rank(rep: np.ndarray, emb: np.ndarray, history: list[int], target: int) -> float:
    """Definition: 1 + #(other non-history items scoring >= the target); inf if target in history."""
    if target in history:
        return math.inf
    s = normalise(emb) @ normalise(rep[None])[0]
    others = [j for j in range(1, emb.shape[0]) if j != target and j not in history]
    return 1.0 + sum(1 for j in others if s[j] >= s[target] - TIE_TOLERANCE)


def test_hand_case_with_ties_and_history() -> None:
    # items 1..4 in 2-d; user rep along x.
    emb = np.array([[0, 0], [1, 0], [1, 0], [0, 1], [1, 1]], dtype=float)
    rep = np.array([[1.0, 0.0]])
    # Target 2 ties with item 1 (score 1): pessimistic, so item 1 ranks ahead: rank 2.
    assert ranks(rep, emb, np.array([0, 0]), np.array([], dtype=int), np.array([2]))[0] == 2
    # With item 1 in the history it is excluded: rank 1.
    assert ranks(rep, emb, np.array([0, 1]), np.array([1]), np.array([2]))[0] == 1
    # Target in the history: a miss.
    assert ranks(rep, emb, np.array([0, 1]), np.array([2]), np.array([2]))[0] == math.inf
    m = ranking_metrics(np.array([1.0, 2.0, math.inf, 11.0]))
    assert math.isclose(m["hr@10"], 0.5) and math.isclose(m["hr@50"], 0.75)
    assert math.isclose(m["ndcg@10"], (1 + 1 / math.log2(3)) / 4)
    assert math.isclose(m["mrr"], (1 + 0.5 + 0 + 1 / 11) / 4)
    assert math.isclose(m["combined"], (m["ndcg@10"] + m["hr@10"] + m["mrr"]) / 3)


def test_constant_model_ranks_last() -> None:
    emb = np.ones((21, 3))
    emb[0] = 0
    r = ranks(np.ones((2, 3)), emb, np.array([0, 0, 2]), np.array([5, 6]), np.array([1, 7]))
    assert list(r) == [20.0, 18.0]  # every other valid item ties and ranks ahead


@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 25),
    st.integers(1, 6),
    st.integers(1, 3),
    st.integers(0, 2**31 - 1),
    st.booleans(),
)
def test_matches_brute_force(items: int, users: int, d: int, seed: int, coarse: bool) -> None:
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(items + 1, d))
    reps = rng.normal(size=(users, d))
    if coarse:  # many exact ties
        emb, reps = np.round(emb), np.round(reps)
    hist = [list(rng.choice(np.arange(1, items + 1), size=int(rng.integers(0, items)), replace=False))
            for _ in range(users)]  # fmt: skip
    targets = rng.integers(1, items + 1, size=users)
    offsets = np.concatenate([[0], np.cumsum([len(h) for h in hist])]).astype(np.int64)
    flat = np.array([i for h in hist for i in h], dtype=np.int64)
    got = ranks(reps, emb, offsets, flat, targets)
    want = [brute_rank(reps[u], emb, hist[u], int(targets[u])) for u in range(users)]
    assert list(got) == want
    m = ranking_metrics(got)
    assert all(0.0 <= v <= 1.0 for v in m.values())
    assert m["hr@10"] <= m["hr@50"] and m["ndcg@10"] <= m["ndcg@50"] + 1e-12
