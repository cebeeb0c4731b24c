"""Judge of AHC058: parse the action list and play the production plan, with 64-bit integers.

Rules of one turn (restated from the statement): machines are indexed by level i (0 .. L-1) and
ID j (0 .. N-1); B[i][j] (count) starts at 1, P[i][j] (power) at 0, apples at K.

1. The action is either "do nothing" (``-1``) or "strengthen j^i" (``i j``): pay
   ``C[i][j] * (P[i][j] + 1)`` apples and add 1 to P[i][j]. Paying more apples than are held is
   not allowed.
2. Then, level by level from 0 upwards: level 0 adds ``A[j] * B[0][j] * P[0][j]`` apples for every
   j; level i >= 1 adds ``B[i][j] * P[i][j]`` to B[i-1][j]. Because level i reads B[i] before
   level i+1 raises it, every level uses the counts from before this step.

After T turns the case scores ``round(1e5 * log2(S))`` for S final apples (0 when S < 1).

Output rules (each rejection names one): ``format`` (a line must be ``-1`` or two non-negative
integers ``i j``; blank lines and lines whose first non-blank character is ``#`` are ignored),
``machine-range`` (0 <= i < L and 0 <= j < N), ``action-count`` (exactly T actions),
``apples`` (never pay more than you have), ``overflow`` (every count and the apple total must
fit in a signed 64-bit integer, as in the official tester; we reject instead of wrapping around).

:func:`simulate_batch` plays many cases at once with numpy int64 arrays. Alongside, it bounds
every new value in float64; a case whose bound reaches 2^62 is replayed exactly with Python
integers by :func:`simulate_exact` (which also decides ``overflow``), so int64 wrap-around can
never go unnoticed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from environments.ahc_common.parsing import OutputRejected, show

from .data import Instance

I64_MAX = 2**63 - 1
_GUARD = 2.0**62
_MAX_DIGITS = 6


def parse_actions(stdout: bytes, inst: Instance) -> np.ndarray:
    """The T actions of an output as a [T, 2] int64 array of (level, id); (-1, -1) = do nothing.

    Raises:
        OutputRejected: ``format``, ``machine-range`` or ``action-count``.
    """
    levels: list[int] = []
    ids: list[int] = []
    for number, raw in enumerate(stdout.split(b"\n"), start=1):
        tok = raw.split()
        if not tok or tok[0][:1] == b"#":
            continue
        if len(levels) == inst.turns:
            raise OutputRejected(
                "action-count", f"line {number}: more than T = {inst.turns} actions (comments start with #)"
            )
        if len(tok) == 1 and tok[0] == b"-1":
            levels.append(-1)
            ids.append(-1)
            continue
        if len(tok) != 2 or not all(t.isdigit() and len(t) <= _MAX_DIGITS for t in tok):
            raise OutputRejected(
                "format", f"line {number}: expected '-1' or 'i j', got {show(raw.strip(), 40)}"
            )
        i, j = int(tok[0]), int(tok[1])
        if i >= inst.levels or j >= inst.n:
            raise OutputRejected(
                "machine-range",
                f"line {number}: machine {j}^{i} does not exist (level < {inst.levels}, id < {inst.n})",
            )
        levels.append(i)
        ids.append(j)
    if len(levels) != inst.turns:
        raise OutputRejected("action-count", f"{len(levels)} actions, exactly T = {inst.turns} are needed")
    return np.array([levels, ids], dtype=np.int64).T.reshape(inst.turns, 2)


def case_score(apples: int) -> int:
    """``round(1e5 * log2(S))`` (halves away from zero), 0 when S < 1."""
    if apples < 1:
        return 0
    return math.floor(1e5 * math.log2(apples) + 0.5)


def _short(t: int, i: int, j: int, cost: int, held: int) -> OutputRejected:
    return OutputRejected(
        "apples", f"turn {t}: strengthening machine {j}^{i} costs {cost} apples but only {held} are held"
    )


def simulate_exact(inst: Instance, actions: np.ndarray) -> int:
    """Final apples of one plan, with exact Python integers (the executable specification).

    Raises:
        OutputRejected: ``apples`` or ``overflow``.
    """
    n, levels = inst.n, inst.levels
    a = [int(x) for x in inst.a]
    c = [[int(x) for x in row] for row in inst.c]
    b = [[1] * n for _ in range(levels)]
    p = [[0] * n for _ in range(levels)]
    apples = int(inst.apples)
    for t, (i, j) in enumerate(np.asarray(actions).tolist()):
        if i >= 0:
            cost = c[i][j] * (p[i][j] + 1)
            if cost > apples:
                raise _short(t, i, j, cost, apples)
            apples -= cost
            p[i][j] += 1
        apples += sum(a[k] * b[0][k] * p[0][k] for k in range(n))
        for lv in range(1, levels):
            up, power, down = b[lv], p[lv], b[lv - 1]
            for k in range(n):
                down[k] += up[k] * power[k]
        # Everything only grows within a turn, so checking at its end catches every overflow.
        if apples > I64_MAX or max(max(row) for row in b) > I64_MAX:
            raise OutputRejected("overflow", f"turn {t}: a machine count or the apple total exceeds 2^63 - 1")
    return apples


def simulate_batch(
    instances: Sequence[Instance], actions: Sequence[np.ndarray]
) -> list[int | OutputRejected]:
    """Final apples (or the rejection) of many plans; instances must share N, L and T.

    Returns:
        Per plan, the final apple count or the rule it broke.

    Raises:
        ValueError: If the instances differ in size.
    """
    k = len(instances)
    if k == 0:
        return []
    n, levels, turns = instances[0].n, instances[0].levels, instances[0].turns
    if any((x.n, x.levels, x.turns) != (n, levels, turns) for x in instances):
        raise ValueError("simulate_batch needs instances of one size")
    a = np.stack([x.a for x in instances]).astype(np.int64)
    af = a.astype(np.float64)
    c = np.stack([x.c for x in instances]).astype(np.int64)
    act = np.stack([np.asarray(x, dtype=np.int64) for x in actions])  # [K, T, 2]
    apples = np.array([x.apples for x in instances], dtype=np.int64)
    b = np.ones((k, levels, n), dtype=np.int64)
    p = np.zeros((k, levels, n), dtype=np.int64)
    risky = np.zeros(k, dtype=bool)
    failed: dict[int, OutputRejected] = {}
    for t in range(turns):
        lv, ids = act[:, t, 0], act[:, t, 1]
        rows = np.flatnonzero(lv >= 0)
        if rows.size:
            li, ji = lv[rows], ids[rows]
            cost = c[rows, li, ji] * (p[rows, li, ji] + 1)  # <= 1.25e12 * (T + 1): no overflow
            short = cost > apples[rows]
            for r in np.flatnonzero(short & ~risky[rows]).tolist():
                case = int(rows[r])
                if case not in failed:
                    failed[case] = _short(t, int(li[r]), int(ji[r]), int(cost[r]), int(apples[case]))
            pay = ~short
            apples[rows[pay]] -= cost[pay]
            p[rows[pay], li[pay], ji[pay]] += 1
        bf = b.astype(np.float64)
        pf = p.astype(np.float64)
        gain_bound = (af * bf[:, 0, :] * pf[:, 0, :]).sum(axis=1)
        risky |= apples.astype(np.float64) + gain_bound >= _GUARD
        if levels > 1:
            risky |= (bf[:, :-1, :] + bf[:, 1:, :] * pf[:, 1:, :]).max(axis=(1, 2)) >= _GUARD
        apples += (a * (b[:, 0, :] * p[:, 0, :])).sum(axis=1)
        b[:, :-1, :] += b[:, 1:, :] * p[:, 1:, :]  # the right side is computed from the old counts
    out: list[int | OutputRejected] = []
    for case in range(k):
        if risky[case]:  # replay exactly; this also decides apples-shortage after the guard tripped
            try:
                out.append(simulate_exact(instances[case], act[case]))
            except OutputRejected as e:
                out.append(e)
        elif case in failed:
            out.append(failed[case])
        else:
            out.append(int(apples[case]))
    return out
