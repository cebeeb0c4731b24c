"""AHC039 judge: hand-worked polygons, one crafted violation per rule, and a brute-force cross-check."""

from __future__ import annotations

import numpy as np
import pytest

from environments.ahc039.data import Instance
from environments.ahc039.judge import case_score, check_polygon, inside, last_polygon, points_of
from environments.ahc_common.parsing import OutputRejected


def instance(mackerels: list[tuple[int, int]], sardines: list[tuple[int, int]]) -> Instance:
    assert len(mackerels) == len(sardines)
    pts = np.array(mackerels + sardines, dtype=np.int64)
    return Instance(len(mackerels), pts[:, 0].copy(), pts[:, 1].copy())


def out(*polygons: list[tuple[int, int]]) -> bytes:
    text = ""
    for poly in polygons:
        text += f"{len(poly)}\n" + "".join(f"{x} {y}\n" for x, y in poly)
    return text.encode()


def score(inst: Instance, stdout: bytes) -> int:
    return case_score(points_of(inst), stdout)


SQUARE = [(0, 0), (10, 0), (10, 10), (0, 10)]
# An L: the square [0, 20]^2 without its top-right quarter (10, 20] x (10, 20].
ELL = [(0, 0), (20, 0), (20, 10), (10, 10), (10, 20), (0, 20)]


# -- hand-worked scores --------------------------------------------------------------------------
def test_square_counts_boundary_points_as_inside() -> None:
    # mackerels: centre (in), corner (on), edge (on), just outside  -> a = 3
    # sardines: inside, far away, just above, on the top edge       -> b = 2
    inst = instance([(5, 5), (0, 0), (10, 5), (11, 5)], [(3, 3), (20, 20), (10, 11), (5, 10)])
    assert score(inst, out(SQUARE)) == 3 - 2 + 1
    assert score(inst, out(SQUARE[::-1])) == 2  # clockwise or counter-clockwise


def test_concave_polygon() -> None:
    # mackerels: in the notch (out), on the notch's floor (on), on the inner wall (on), inside -> a = 3
    # sardines: the reflex corner (on), right of the polygon, in the notch, a convex corner -> b = 2
    inst = instance([(15, 15), (15, 10), (10, 15), (5, 5)], [(10, 10), (21, 0), (19, 19), (0, 20)])
    assert score(inst, out(ELL)) == 2


def test_score_is_floored_at_zero() -> None:
    inst = instance([(50, 50), (60, 60), (70, 70)], [(1, 1), (2, 2), (3, 3)])
    assert score(inst, out(SQUARE)) == 0  # a - b + 1 = 0 - 3 + 1 < 0


def test_collinear_vertices_are_allowed() -> None:
    inst = instance([(5, 5), (0, 0), (10, 5), (11, 5)], [(3, 3), (20, 20), (10, 11), (5, 10)])
    with_midpoints = [(0, 0), (5, 0), (10, 0), (10, 3), (10, 10), (0, 10), (0, 4)]
    assert score(inst, out(with_midpoints)) == score(inst, out(SQUARE)) == 2


def test_only_the_last_polygon_is_scored() -> None:
    inst = instance([(5, 5), (15, 15)], [(100, 100), (200, 200)])
    big = [(0, 0), (300, 0), (300, 300), (0, 300)]
    # a self-crossing earlier polygon is ignored as long as it is complete
    crossing = [(0, 5), (10, 5), (10, 10), (5, 10), (5, 0), (0, 0)]
    assert score(inst, out(big)) == 2 - 2 + 1
    assert score(inst, out(big, SQUARE)) == 1 - 0 + 1
    assert score(inst, out(crossing, SQUARE)) == 2
    assert last_polygon(out(big, SQUARE)).tolist() == [list(p) for p in SQUARE]


def test_whole_area_square_has_the_largest_legal_perimeter() -> None:
    inst = instance([(0, 0), (100000, 100000)], [(50000, 50000), (1, 99999)])
    full = [(0, 0), (100000, 0), (100000, 100000), (0, 100000)]
    assert score(inst, out(full)) == 2 - 2 + 1


# -- one crafted violation per rule ------------------------------------------------------------
VIOLATIONS = {
    "three-vertices": (b"3\n0 0\n10 0\n10 10\n", "vertex-count"),
    "too-many-vertices": (out([(i // 2 * 2 + (i % 2 == 1) * 1, 0) for i in range(1001)]), "vertex-count"),
    "negative-count": (b"-4\n", "vertex-count"),
    "truncated": (b"4\n0 0\n10 0\n10 10\n0\n", "format"),
    "not-integers": (b"4\n0 0\n10 0\n10 10\n0 1e1\n", "format"),
    "garbage": (b"hello\n", "format"),
    "earlier-polygon-out-of-range": (
        out([(0, 0), (5, 0), (5, 100001), (0, 100001)], SQUARE),
        "coordinate-range",
    ),
    "not-utf8": (b"4\n0 0\n10 0\n10 10\n0 10\n\xff", "utf-8"),
    "negative-coordinate": (out([(0, 0), (10, 0), (10, 10), (-1, 10)]), "coordinate-range"),
    "coordinate-too-large": (out([(0, 0), (100001, 0), (100001, 10), (0, 10)]), "coordinate-range"),
    "repeated-vertex": (out([(0, 0), (10, 0), (10, 10), (0, 10), (0, 0), (0, 5)]), "distinct-vertices"),
    "diagonal-edge": (out([(0, 0), (10, 0), (10, 10), (1, 9)]), "axis-parallel"),
    "diagonal-closing-edge": (out([(0, 0), (10, 0), (10, 10), (5, 10), (5, 5)]), "axis-parallel"),
    "perimeter-400002": (
        out(
            [
                (0, 0),
                (100000, 0),
                (100000, 100000),
                (0, 100000),
                (0, 50001),
                (1, 50001),
                (1, 50000),
                (0, 50000),
            ]
        ),
        "perimeter",
    ),
    "crossing-edges": (out([(0, 5), (10, 5), (10, 10), (5, 10), (5, 0), (0, 0)]), "self-intersection"),
    "doubling-back": (out([(0, 0), (10, 0), (5, 0), (5, 5), (0, 5)]), "self-intersection"),
    "collinear-overlap": (
        out([(0, 0), (10, 0), (10, 10), (6, 10), (6, 0), (4, 0), (4, 10), (0, 10)]),
        "self-intersection",
    ),
    "closing-edge-overlaps-first-edge": (
        out([(0, 0), (10, 0), (10, 10), (6, 10), (6, 4), (5, 4), (5, 10), (4, 10), (4, 0)]),
        "self-intersection",
    ),
    "figure-eight-through-a-corner": (
        out([(0, 0), (5, 0), (5, 5), (10, 5), (10, 10), (5, 10), (5, 5), (0, 5)]),
        "distinct-vertices",
    ),
}


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_each_rule_rejects_its_violation(name: str) -> None:
    stdout, rule = VIOLATIONS[name]
    inst = instance([(5, 5)], [(6, 6)])
    with pytest.raises(OutputRejected) as e:
        score(inst, stdout)
    assert e.value.rule == rule, str(e.value)
    assert f"rule '{rule}'" in str(e.value)


def test_perimeter_of_exactly_400000_passes_and_one_more_unit_fails() -> None:
    ok = [(0, 0), (100000, 0), (100000, 100000), (0, 100000)]
    check_polygon(np.array(ok))
    # 99999 + 100000 + 99999 + 100000 + 2 (a unit notch) = 399998 + 2 = 400000
    notch = [(0, 0), (99999, 0), (99999, 50000), (100000, 50000), (100000, 50001), (99999, 50001)]
    notch += [(99999, 100000), (0, 100000)]
    check_polygon(np.array(notch))


# -- brute-force cross-check -------------------------------------------------------------------
def _boxes_meet(s: tuple, t: tuple) -> bool:
    (a1, b1), (a2, b2) = s
    (c1, d1), (c2, d2) = t
    return max(min(a1, a2), min(c1, c2)) <= min(max(a1, a2), max(c1, c2)) and max(
        min(b1, b2), min(d1, d2)
    ) <= min(max(b1, b2), max(d1, d2))


def brute_valid(v: list[tuple[int, int]]) -> bool:
    """Distinct vertices, axis-parallel and simple, checked pair by pair."""
    m = len(v)
    if len(set(v)) != m:
        return False
    edges = [(v[i], v[(i + 1) % m]) for i in range(m)]
    if any(a[0] != b[0] and a[1] != b[1] for a, b in edges):
        return False
    for i in range(m):
        for j in range(i + 1, m):
            if j == i + 1 or (i == 0 and j == m - 1):
                shared = edges[i][1] if j == i + 1 else edges[i][0]
                (a1, b1), (a2, b2) = edges[i]
                (c1, d1), (c2, d2) = edges[j]
                lo = (max(min(a1, a2), min(c1, c2)), max(min(b1, b2), min(d1, d2)))
                hi = (min(max(a1, a2), max(c1, c2)), min(max(b1, b2), max(d1, d2)))
                if lo != shared or hi != shared:  # they overlap beyond the common vertex
                    return False
            elif _boxes_meet(edges[i], edges[j]):
                return False
    return True


def brute_inside(v: list[tuple[int, int]], p: tuple[int, int]) -> bool:
    """Boundary first, then the parity of vertical edges crossed by a ray towards +x."""
    m = len(v)
    crossings = 0
    for i in range(m):
        (x1, y1), (x2, y2) = v[i], v[(i + 1) % m]
        if min(x1, x2) <= p[0] <= max(x1, x2) and min(y1, y2) <= p[1] <= max(y1, y2):
            return True
        if x1 == x2 and x1 > p[0] and min(y1, y2) <= p[1] < max(y1, y2):
            crossings += 1
    return crossings % 2 == 1


def random_chain(rng: np.random.Generator) -> list[tuple[int, int]]:
    """A closed chain alternating horizontal and vertical moves on a small grid (often not simple)."""
    k = int(rng.integers(2, 8))
    size = int(rng.integers(3, 9))
    xs, ys = rng.integers(0, size, k), rng.integers(0, size, k)
    v: list[tuple[int, int]] = []
    for i in range(k):
        v.append((int(xs[i]), int(ys[i])))
        v.append((int(xs[(i + 1) % k]), int(ys[i])))
    if rng.random() < 0.3:  # a collinear mid-point (or a duplicate, when the edge has length < 2)
        i = int(rng.integers(len(v)))
        a, b = v[i], v[(i + 1) % len(v)]
        v.insert(i + 1, ((a[0] + b[0]) // 2, (a[1] + b[1]) // 2))
    return v


def test_validity_and_inside_agree_with_brute_force() -> None:
    rng = np.random.default_rng(20241110)
    valid = 0
    for _ in range(2500):
        v = random_chain(rng)
        expected = brute_valid(v)
        try:
            poly = check_polygon(np.array(v))
            got = True
        except OutputRejected:
            got = False
        assert got == expected, v
        if not got:
            continue
        valid += 1
        size = max(max(p) for p in v) + 2
        grid = [(x, y) for x in range(-1, size) for y in range(-1, size)]
        mask = inside(poly, np.array([p[0] for p in grid]), np.array([p[1] for p in grid]))
        assert mask.tolist() == [brute_inside(v, p) for p in grid], v
    assert valid > 200  # the sample holds enough valid polygons to mean something


def skyline(rng: np.random.Generator, columns: int) -> list[tuple[int, int]]:
    """A valid polygon: a histogram of ``columns`` bars of random heights on a common floor."""
    xs = np.sort(rng.choice(np.arange(1, 2000), size=columns + 1, replace=False)).tolist()
    heights = [int(rng.integers(5, 500))]
    while len(heights) < columns:
        h = int(rng.integers(5, 500))
        if h != heights[-1]:
            heights.append(h)
    v = [(xs[0], 2), (xs[-1], 2)]
    for i in range(columns - 1, 0, -1):
        v += [(xs[i + 1], heights[i]), (xs[i], heights[i])]
    v += [(xs[1], heights[0]), (xs[0], heights[0])]
    return v


def test_large_polygons_agree_with_brute_force() -> None:
    rng = np.random.default_rng(39)
    for _ in range(6):
        v = skyline(rng, int(rng.integers(50, 200)))
        poly = check_polygon(np.array(v))
        px, py = rng.integers(0, 2001, 400), rng.integers(0, 501, 400)
        px[:100] = [v[i][0] for i in rng.integers(0, len(v), 100)]  # many points on vertex lines
        py[100:200] = [v[i][1] for i in rng.integers(0, len(v), 100)]
        mask = inside(poly, px, py)
        assert mask.tolist() == [brute_inside(v, (int(x), int(y))) for x, y in zip(px, py, strict=True)]
        # Pull one vertex pair of a bar top far up or down: often the chain now crosses itself.
        for _ in range(4):
            bent = list(v)
            i = int(rng.integers(2, len(v) - 2)) & ~1
            y = int(rng.integers(1, 600))
            bent[i], bent[i + 1] = (bent[i][0], y), (bent[i + 1][0], y)
            try:
                check_polygon(np.array(bent))
                got = True
            except OutputRejected:
                got = False
            assert got == brute_valid(bent)
