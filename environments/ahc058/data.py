"""Inputs of AHC058 (apple machines): parsing, constraint checks and a seeded generator.

Format::

    N L T K
    A_0 .. A_{N-1}
    C_{0,0} .. C_{0,N-1}
    ...
    C_{L-1,0} .. C_{L-1,N-1}

Constraints (statement): N = 10, L = 4, T = 500, K = 1; 1 <= A_j <= 100 with A sorted ascending;
1 <= C_{i,j} <= 1.25e12.

:func:`generate` follows the statement's generation procedure, restated: A_0 = 1 and every other
A_j is 10 raised to a uniform real in [0, 2], rounded; A is then sorted ascending. C_{0,0} = 1 and
every other C_{i,j} is A_j * 500^i * 10^u with u uniform in [0, 2], rounded (using the sorted A).
It uses numpy's PCG64 generator, so it follows the official distribution but is **not
bit-identical** to the official Rust tool; the official public inputs (seeds 0..149) are used as
data files instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

N_IDS = 10
N_LEVELS = 4
TURNS = 500
START_APPLES = 1
MAX_COST = 1_250_000_000_000


@dataclass(frozen=True)
class Instance:
    """One test case."""

    n: int
    """Number of machine IDs (N)."""
    levels: int
    """Number of machine levels (L)."""
    turns: int
    """Number of turns (T)."""
    apples: int
    """Apples at the start (K)."""
    a: np.ndarray
    """[N] int64 production capacity of each level-0 machine."""
    c: np.ndarray
    """[L, N] int64 initial cost of each machine."""


def check_instance(inst: Instance, statement_sizes: bool = True) -> None:
    """Check the statement's constraints.

    Args:
        inst: The instance.
        statement_sizes: Also require N = 10, L = 4, T = 500, K = 1.

    Raises:
        ValueError: On the first broken constraint.
    """
    if statement_sizes and (inst.n, inst.levels, inst.turns, inst.apples) != (
        N_IDS,
        N_LEVELS,
        TURNS,
        START_APPLES,
    ):
        raise ValueError(f"(N, L, T, K) = {(inst.n, inst.levels, inst.turns, inst.apples)}")
    if min(inst.n, inst.levels, inst.turns) < 1 or inst.apples < 0:
        raise ValueError("N, L, T must be positive and K non-negative")
    if inst.a.shape != (inst.n,) or inst.c.shape != (inst.levels, inst.n):
        raise ValueError("A or C has the wrong number of entries")
    if inst.a.min() < 1 or inst.a.max() > 100 or (np.diff(inst.a) < 0).any():
        raise ValueError("A must be sorted with 1 <= A_j <= 100")
    if inst.c.min() < 1 or inst.c.max() > MAX_COST:
        raise ValueError(f"C must satisfy 1 <= C <= {MAX_COST}")


def parse_input(data: bytes) -> Instance:
    """Parse an input file.

    Raises:
        ValueError: If the file is malformed or breaks a constraint (sizes may differ from the
            statement's).
    """
    tokens = [int(t) for t in data.split()]
    if len(tokens) < 4:
        raise ValueError("the first line needs N L T K")
    n, levels, turns, apples = tokens[:4]
    if min(n, levels, turns) < 1:
        raise ValueError(f"N, L, T must be positive, got {(n, levels, turns)}")
    if len(tokens) != 4 + n + levels * n:
        raise ValueError(f"expected {4 + n + levels * n} numbers, got {len(tokens)}")
    a = np.array(tokens[4 : 4 + n], dtype=np.int64)
    c = np.array(tokens[4 + n :], dtype=np.int64).reshape(levels, n)
    inst = Instance(n, levels, turns, apples, a, c)
    check_instance(inst, statement_sizes=False)
    return inst


def format_input(inst: Instance) -> bytes:
    """The input file of an instance, in the statement's format."""
    lines = [f"{inst.n} {inst.levels} {inst.turns} {inst.apples}", " ".join(map(str, inst.a.tolist()))]
    lines += [" ".join(map(str, row)) for row in inst.c.tolist()]
    return ("\n".join(lines) + "\n").encode()


def _round_half_up(v: np.ndarray) -> np.ndarray:
    return np.floor(v + 0.5).astype(np.int64)  # all values are positive


def generate(seed: int) -> Instance:
    """A seeded instance drawn as the statement describes (see the module docstring)."""
    rng = np.random.default_rng(seed)
    a = _round_half_up(10.0 ** rng.uniform(0.0, 2.0, size=N_IDS))
    a[0] = 1
    a = np.sort(a)
    scale = 10.0 ** rng.uniform(0.0, 2.0, size=(N_LEVELS, N_IDS))
    c = _round_half_up(a[None, :] * (500.0 ** np.arange(N_LEVELS))[:, None] * scale)
    c[0, 0] = 1
    return Instance(N_IDS, N_LEVELS, TURNS, START_APPLES, a, c)
