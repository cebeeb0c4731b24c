"""Judge of AHC058: read the action list as the official tester does and play the plan in i64.

Rules of one turn (restated from the statement): machines are indexed by level i (0 .. L-1) and
ID j (0 .. N-1); B[i][j] (count) starts at 1, P[i][j] (power) at 0, apples at K.

1. The action is either "do nothing" (``-1``) or "strengthen j^i" (``i j``): pay
   ``C[i][j] * (P[i][j] + 1)`` apples and add 1 to P[i][j]. Paying more apples than are held is
   not allowed.
2. Then, level by level from 0 upwards: level 0 adds ``A[j] * B[0][j] * P[0][j]`` apples for every
   j; level i >= 1 adds ``B[i][j] * P[i][j]`` to B[i-1][j]. Because level i reads B[i] before
   level i+1 raises it, every level uses the counts from before this step.

After T turns the case scores ``round(1e5 * log2(S))`` for S final apples (0 when S < 1).

Reading the output (the official tester's rules, which go beyond the statement): the output must
be UTF-8; lines are cut at line feeds and trimmed; empty lines and lines starting with ``#``
are skipped; reading stops at the T-th action, so anything after it is ignored; fewer than T
actions is wrong. An action line is ``-1`` or ``i j`` and nothing more; ``i`` is read as a Rust ``i32``
(``+0``, ``-0``, ``0003`` and ``-01`` are fine) in ``[-1, L-1]``, ``j`` as a ``usize`` (no ``-``
sign) in ``[0, N-1]``.

Arithmetic is 64-bit and wraps around on overflow, as the tester's (built with overflow checks
off) does; a plan whose apples end at 0 or below scores 0.

Rules (each rejection names one): ``utf-8``, ``format`` (not an action line), ``machine-range``
(a number out of range), ``action-count`` (fewer than T actions), ``apples`` (paying more than is
held).

:func:`simulate_batch` plays many cases at once with numpy int64 arrays, whose arithmetic wraps
exactly like Rust's wrapping i64; :func:`simulate_exact` is the plain, per-case specification
(Python integers reduced to i64 at every turn) that the batch is tested against.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from environments.ahc_common.parsing import OutputRejected, as_text, rust_int, show

from .data import Instance

_MOD = 2**64
_HALF = 2**63


def wrap_i64(x: int) -> int:
    """``x`` reduced to a signed 64-bit integer, as Rust's wrapping arithmetic leaves it."""
    return (x + _HALF) % _MOD - _HALF


def parse_actions(stdout: bytes, inst: Instance) -> np.ndarray:
    """The T actions of an output as a [T, 2] int64 array of (level, id); (-1, -1) = do nothing.

    Raises:
        OutputRejected: ``utf-8``, ``format``, ``machine-range`` or ``action-count``.
    """
    levels: list[int] = []
    ids: list[int] = []
    for number, raw in enumerate(as_text(stdout).split(b"\n"), start=1):
        if len(levels) == inst.turns:
            break  # the tester stops reading at the T-th action
        tok = raw.split()
        if not tok or tok[0][:1] == b"#":
            continue
        level = int(tok[0]) if tok[0].isdigit() and len(tok[0]) < 10 else rust_int(tok[0])
        if level is None:
            raise OutputRejected(
                "format", f"line {number}: expected '-1' or 'i j', got {show(raw.strip(), 40)}"
            )
        if not -1 <= level < inst.levels:
            raise OutputRejected(
                "machine-range", f"line {number}: level {level} is not -1 or in [0, {inst.levels - 1}]"
            )
        ident = -1
        if level >= 0:
            if len(tok) < 2:
                raise OutputRejected("format", f"line {number}: level {level} without an id")
            t1 = tok[1]
            ident_or_none = int(t1) if t1.isdigit() and len(t1) < 10 else rust_int(t1, unsigned=True)
            if ident_or_none is None:
                raise OutputRejected("format", f"line {number}: id {show(t1)} is not an integer >= 0")
            ident = ident_or_none
            if ident >= inst.n:
                raise OutputRejected(
                    "machine-range", f"line {number}: machine {ident}^{level} does not exist (id < {inst.n})"
                )
        if len(tok) > (1 if level < 0 else 2):
            raise OutputRejected("format", f"line {number}: too many numbers in {show(raw.strip(), 40)}")
        levels.append(level)
        ids.append(ident)
    if len(levels) < inst.turns:
        raise OutputRejected("action-count", f"{len(levels)} actions, T = {inst.turns} are needed")
    return np.array([levels, ids], dtype=np.int64).T.reshape(inst.turns, 2)


def case_score(apples: int) -> int:
    """``round(1e5 * log2(S))`` as the tester computes it, 0 when S < 1.

    ``S`` goes through ``f64`` first (Rust's ``as f64``: round to nearest) and the result is
    rounded half away from zero (Rust's ``f64::round``).
    """
    if apples < 1:
        return 0
    x = 1e5 * math.log2(float(apples))
    r = math.floor(x)
    return r + 1 if x - r >= 0.5 else r  # x - floor(x) is exact for x >= 0


def _short(t: int, i: int, j: int, cost: int, held: int) -> OutputRejected:
    return OutputRejected(
        "apples", f"turn {t}: strengthening machine {j}^{i} costs {cost} apples but only {held} are held"
    )


def simulate_exact(inst: Instance, actions: np.ndarray) -> int:
    """Final apples of one plan, in wrapping 64-bit arithmetic (the executable specification).

    Additions and multiplications wrap modulo 2^64, so reducing to i64 once per turn (before the
    next comparison of apples with a cost) gives exactly the tester's values.

    Raises:
        OutputRejected: ``apples``.
    """
    n, levels = inst.n, inst.levels
    a = [int(x) for x in inst.a]
    c = [[int(x) for x in row] for row in inst.c]
    b = [[1] * n for _ in range(levels)]
    p = [[0] * n for _ in range(levels)]
    apples = int(inst.apples)
    for t, (i, j) in enumerate(np.asarray(actions).tolist()):
        if i >= 0:
            cost = wrap_i64(c[i][j] * (p[i][j] + 1))
            if cost > apples:
                raise _short(t, i, j, cost, apples)
            apples -= cost
            p[i][j] += 1
        apples += sum(a[k] * b[0][k] * p[0][k] for k in range(n))
        for lv in range(1, levels):
            up, power, down = b[lv], p[lv], b[lv - 1]
            for k in range(n):
                down[k] = wrap_i64(down[k] + up[k] * power[k])
        apples = wrap_i64(apples)
    return apples


def simulate_batch(
    instances: Sequence[Instance], actions: Sequence[np.ndarray]
) -> list[int | OutputRejected]:
    """Final apples (or the rejection) of many plans; instances must share N, L and T.

    numpy's int64 arithmetic wraps around exactly like the tester's i64, so no overflow handling
    is needed.

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
    c = np.stack([x.c for x in instances]).astype(np.int64)
    act = np.stack([np.asarray(x, dtype=np.int64) for x in actions])  # [K, T, 2]
    apples = np.array([x.apples for x in instances], dtype=np.int64)
    b = np.ones((k, levels, n), dtype=np.int64)
    p = np.zeros((k, levels, n), dtype=np.int64)
    failed: dict[int, OutputRejected] = {}
    for t in range(turns):
        lv, ids = act[:, t, 0], act[:, t, 1]
        rows = np.flatnonzero(lv >= 0)
        if rows.size:
            li, ji = lv[rows], ids[rows]
            cost = c[rows, li, ji] * (p[rows, li, ji] + 1)
            short = cost > apples[rows]
            for r in np.flatnonzero(short).tolist():
                case = int(rows[r])
                if case not in failed:
                    failed[case] = _short(t, int(li[r]), int(ji[r]), int(cost[r]), int(apples[case]))
            pay = ~short
            apples[rows[pay]] -= cost[pay]
            p[rows[pay], li[pay], ji[pay]] += 1
        apples += (a * (b[:, 0, :] * p[:, 0, :])).sum(axis=1)
        b[:, :-1, :] += b[:, 1:, :] * p[:, 1:, :]  # the right side is computed from the old counts
    return [failed.get(case, int(apples[case])) for case in range(k)]
