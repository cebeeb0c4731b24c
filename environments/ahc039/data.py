"""Inputs of AHC039 (purse seine fishing): parsing, constraint checks and a seeded generator.

Format: ``N`` on the first line, then ``2N`` lines ``x y``; the first N points are mackerels, the
next N sardines. Constraints: ``0 <= x, y <= 100000`` and all 2N points distinct (the contest
fixes N = 5000; the smoke-test variant uses a smaller N).

:func:`generate` follows the statement's generation procedure, restated:

for each species in turn (mackerels, then sardines):
  * the number of clusters is a uniform integer in [10, 25];
  * each cluster gets a weight uniform in [0, 1), a centre with both coordinates uniform integers
    in [20000, 80000] and a spread sigma uniform integer in [1000, 5000];
  * then, until N points are accepted: pick a cluster with probability proportional to its
    weight, draw x and y independently from a normal distribution around the centre with that
    sigma and round them; accept the point if both coordinates lie in [0, 100000] and it differs
    from every point accepted so far (of either species), otherwise draw again.

It uses numpy's PCG64 generator, so it follows the same distribution as the official Rust tool
but is **not bit-identical** to it: a seed here does not give the official input of that seed.
The official public inputs (seeds 0..149) are used as data files instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

COORD_MAX = 100_000
_KEY = COORD_MAX + 1


@dataclass(frozen=True)
class Instance:
    """One test case."""

    n: int
    """Number of mackerels (= number of sardines)."""
    x: np.ndarray
    """[2n] int64 x coordinates; mackerels first."""
    y: np.ndarray
    """[2n] int64 y coordinates; mackerels first."""


def check_instance(inst: Instance, n: int | None = None) -> None:
    """Check the statement's constraints.

    Args:
        inst: The instance.
        n: Required N (None: any positive N).

    Raises:
        ValueError: On the first broken constraint.
    """
    if inst.n < 1 or (n is not None and inst.n != n):
        raise ValueError(f"N = {inst.n}" + (f", expected {n}" if n is not None else ", expected N >= 1"))
    if inst.x.shape != (2 * inst.n,) or inst.y.shape != (2 * inst.n,):
        raise ValueError(f"expected {2 * inst.n} points, got {inst.x.shape[0]}")
    if min(inst.x.min(), inst.y.min()) < 0 or max(inst.x.max(), inst.y.max()) > COORD_MAX:
        raise ValueError(f"a coordinate lies outside [0, {COORD_MAX}]")
    if np.unique(inst.x * _KEY + inst.y).size != 2 * inst.n:
        raise ValueError("two points coincide")


def parse_input(data: bytes) -> Instance:
    """Parse an input file.

    Raises:
        ValueError: If the file is malformed or breaks a constraint.
    """
    tokens = data.split()
    if not tokens:
        raise ValueError("empty input")
    n = int(tokens[0])
    if n < 1 or len(tokens) != 1 + 4 * n:
        raise ValueError(f"N = {n} needs {1 + 4 * n} numbers, the file has {len(tokens)}")
    xy = np.array(tokens[1:]).astype(np.int64).reshape(2 * n, 2)
    inst = Instance(n, np.ascontiguousarray(xy[:, 0]), np.ascontiguousarray(xy[:, 1]))
    check_instance(inst)
    return inst


def format_input(inst: Instance) -> bytes:
    """The input file of an instance, in the statement's format."""
    lines = [str(inst.n)] + [f"{x} {y}" for x, y in zip(inst.x.tolist(), inst.y.tolist(), strict=True)]
    return ("\n".join(lines) + "\n").encode()


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)


def _species(rng: np.random.Generator, n: int, seen: set[int]) -> list[tuple[int, int]]:
    clusters = int(rng.integers(10, 25, endpoint=True))
    weight = rng.random(clusters)
    cx = rng.integers(20_000, 80_000, size=clusters, endpoint=True)
    cy = rng.integers(20_000, 80_000, size=clusters, endpoint=True)
    sigma = rng.integers(1_000, 5_000, size=clusters, endpoint=True)
    prob = weight / weight.sum()
    out: list[tuple[int, int]] = []
    while len(out) < n:
        batch = (n - len(out)) + 64
        pick = rng.choice(clusters, size=batch, p=prob)
        xs = _round_half_away(rng.normal(cx[pick], sigma[pick])).tolist()
        ys = _round_half_away(rng.normal(cy[pick], sigma[pick])).tolist()
        for x, y in zip(xs, ys, strict=True):
            if not (0 <= x <= COORD_MAX and 0 <= y <= COORD_MAX):
                continue
            key = x * _KEY + y
            if key in seen:
                continue
            seen.add(key)
            out.append((x, y))
            if len(out) == n:
                break
    return out


def generate(seed: int, n: int = 5000) -> Instance:
    """A seeded instance drawn as the statement describes (see the module docstring)."""
    rng = np.random.default_rng(seed)
    seen: set[int] = set()
    points = _species(rng, n, seen) + _species(rng, n, seen)
    arr = np.array(points, dtype=np.int64)
    return Instance(n, np.ascontiguousarray(arr[:, 0]), np.ascontiguousarray(arr[:, 1]))
