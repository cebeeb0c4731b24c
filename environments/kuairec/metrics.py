"""Full-catalog ranking metrics (trusted side).

Scores are cosine similarities between a user representation and every item embedding. Items in
the user's input history are excluded from the ranking, as FuXi-Linear's evaluator does; a target
that is itself in the history therefore can never be hit (KuaiRec users re-watch: such users count
as misses; excluding everything else but keeping the target would reveal which history item is
the target). Ties are ranked pessimistically (the target ranks below every other candidate with an
equal score, where scores within ``TIE_TOLERANCE`` of each other are equal: cosines computed in
different orders differ in the last bits), so a constant model ranks every target last.

rank r (1-based; ``inf`` for a miss): NDCG@K = 1/log2(r+1) if r <= K else 0; HR@K = [r <= K];
MRR = 1/r (untruncated). combined = mean(NDCG@10, HR@10, MRR).
"""

from __future__ import annotations

import math

import numpy as np

CHUNK_USERS = 512
TIE_TOLERANCE = 1e-9
"""Cosine scores closer than this count as tied (ranked against the target)."""


def normalise(x: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows scaled to unit L2 norm (float64; zero rows stay zero)."""
    x = np.asarray(x, dtype=np.float64)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), eps)


def ranks(
    reps: np.ndarray, item_emb: np.ndarray, offsets: np.ndarray, history: np.ndarray, targets: np.ndarray
) -> np.ndarray:
    """Rank of each user's target among the items not in their history.

    Args:
        reps: [users, d] user representations.
        item_emb: [num_items + 1, d]; row 0 (padding) is never ranked.
        offsets: [users + 1] offsets of each user's history in ``history``.
        history: Concatenated 1-based item ids of the input histories.
        targets: [users] 1-based target item ids.

    Returns:
        [users] float64 ranks (``inf`` where the target is in the history).
    """
    users = reps.shape[0]
    items = normalise(item_emb)
    out = np.empty(users, dtype=np.float64)
    for a in range(0, users, CHUNK_USERS):
        b = min(a + CHUNK_USERS, users)
        scores = normalise(reps[a:b]) @ items.T  # [chunk, n + 1]
        scores[:, 0] = -np.inf
        rows = np.arange(b - a)
        t = targets[a:b]
        target_score = scores[rows, t].copy()
        excluded = np.zeros(scores.shape, dtype=bool)
        for r, u in enumerate(range(a, b)):
            excluded[r, history[offsets[u] : offsets[u + 1]]] = True
        hit_possible = ~excluded[rows, t]
        excluded[:, 0] = True
        excluded[rows, t] = True  # the target is not its own competitor
        ahead = ((scores >= target_score[:, None] - TIE_TOLERANCE) & ~excluded).sum(axis=1)
        out[a:b] = np.where(hit_possible, 1.0 + ahead, np.inf)
    return out


def ranking_metrics(r: np.ndarray) -> dict[str, float]:
    """NDCG / HR at 10 and 50, MRR and the combined score from ranks."""
    r = np.asarray(r, dtype=np.float64)
    out: dict[str, float] = {}
    for k in (10, 50):
        within = r <= k
        gain = np.zeros_like(r)
        gain[within] = 1.0 / np.log2(r[within] + 1.0)
        out[f"ndcg@{k}"] = float(gain.mean())
        out[f"hr@{k}"] = float(within.mean())
    out["mrr"] = float(np.mean(np.where(np.isfinite(r), 1.0 / r, 0.0)))
    out["combined"] = (out["ndcg@10"] + out["hr@10"] + out["mrr"]) / 3.0
    assert all(math.isfinite(v) for v in out.values())
    return out
