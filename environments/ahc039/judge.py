"""Judge of AHC039: parse the last polygon, check every rule, count the fish inside it.

Output: one or more polygons, each ``m`` followed by ``m`` vertices ``x y`` (whitespace-separated
integers, read as the official tester reads them: see :mod:`environments.ahc_common.parsing`).
Every polygon must be complete, with ``m`` and all its coordinates in range; only the last one
is checked further and scored. No polygon at all scores 1 (the tester's empty polygon).

Rules (each rejection names one; where several are broken, the name may differ from the
tester's message, the score of 0 never does):

* ``utf-8`` / ``format``: valid UTF-8, integers only, every polygon complete.
* ``vertex-count``: ``4 <= m <= 1000`` for every polygon.
* ``coordinate-range``: every vertex of every polygon has ``0 <= x, y <= 100000``.
* ``distinct-vertices``: no two vertices coincide.
* ``axis-parallel``: every edge (including the closing one) is horizontal or vertical.
* ``perimeter``: the total edge length is at most 400000.
* ``self-intersection``: non-adjacent edges share no point, and adjacent edges share only their
  common vertex (two consecutive collinear edges must not double back over each other).

Score of a valid polygon: ``max(0, a - b + 1)`` with ``a`` mackerels and ``b`` sardines inside or on
the boundary.

Method. Consecutive collinear edges are merged first, which leaves a closed chain whose "corner"
edges alternate between horizontal and vertical and whose point set is unchanged. Then:

* horizontal / horizontal contacts: sorting the horizontal edges by (y, left end), any overlap
  shows up between neighbours in that order (if edge p overlaps a later edge q on the same line,
  it also overlaps the edge right after p, whose left end lies between p's and q's);
* horizontal / vertical contacts: for each horizontal edge, the vertical edges whose x lies in
  its x range are a contiguous run of the x-sorted vertical edges; those candidate pairs (at
  most ``n_h x n_v``, usually a few per edge) get a vectorised y test, ignoring the two neighbours
  of each edge (perpendicular neighbours can only meet at their shared corner);
* inside test: the vertical edges cut the plane into a compressed grid of cells; a 2-D
  difference array plus two cumulative sums gives each cell's crossing parity (inside or not).
  A point counts as inside (boundary included) when any of the four cells touching it diagonally
  (just left/right and just below/above, i.e. at offsets of half a unit) is inside, which holds
  exactly for interior and boundary points because all vertices have integer coordinates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from environments.ahc_common.parsing import OutputRejected, int_tokens

from .data import COORD_MAX, Instance

MIN_VERTICES = 4
MAX_VERTICES = 1000
MAX_PERIMETER = 400_000


@dataclass(frozen=True)
class Polygon:
    """A checked polygon, reduced to its corners."""

    vertices: np.ndarray
    """[m, 2] vertices as printed."""
    corners: np.ndarray
    """[k, 2] vertices where the direction turns (k even, >= 4)."""
    vx: np.ndarray
    """[k/2] x of every vertical corner edge."""
    vy_lo: np.ndarray
    """[k/2] lower y of every vertical corner edge."""
    vy_hi: np.ndarray
    """[k/2] upper y of every vertical corner edge."""
    hy: np.ndarray
    """[k/2] y of every horizontal corner edge."""


def last_polygon(stdout: bytes) -> np.ndarray:
    """The last polygon printed, as an [m, 2] int64 array, after checking every polygon.

    As in the official tester, every printed polygon must be complete, declare
    ``4 <= m <= 1000`` vertices and keep all its coordinates in ``[0, 100000]``; only the last one
    is then checked further and scored. An output without any polygon (empty or whitespace only)
    gives a [0, 2] array: the tester scores that empty polygon as 1 (see :func:`case_score`).

    Raises:
        OutputRejected: ``utf-8``, ``format``, ``vertex-count`` or ``coordinate-range``, for the
            first violation in reading order.
    """
    v = int_tokens(stdout)
    pos, starts = 0, []
    failure: OutputRejected | None = None
    read = 0  # numbers the tester reads before stopping
    while pos < v.size:
        m = int(v[pos])
        if not MIN_VERTICES <= m <= MAX_VERTICES:
            failure = OutputRejected(
                "vertex-count",
                f"polygon {len(starts) + 1} declares {m} vertices; "
                f"need {MIN_VERTICES} <= m <= {MAX_VERTICES}",
            )
            break
        if pos + 1 + 2 * m > v.size:
            failure = OutputRejected(
                "format",
                f"polygon {len(starts) + 1} declares {m} vertices but only {v.size - pos - 1} numbers "
                f"follow (need {2 * m})",
            )
            read = v.size
            break
        starts.append(pos)
        pos += 1 + 2 * m
    read = max(read, pos)
    # The tester range-checks each coordinate as it reads it, so a bad coordinate read before the
    # failure above (if any) is what it reports.
    coord = np.ones(read, dtype=bool)
    coord[starts] = False
    coord[pos:read] = np.arange(pos, read) != pos  # a truncated polygon: its count, then coordinates
    bad = coord & ((v[:read] < 0) | (v[:read] > COORD_MAX))
    if bad.any():
        i = int(np.argmax(bad))
        k = int(np.searchsorted(starts, i)) - 1
        raise OutputRejected(
            "coordinate-range",
            f"polygon {k + 1} (of {len(starts)}) has coordinate {int(v[i])} outside [0, {COORD_MAX}]",
        )
    if failure is not None:
        raise failure
    if not starts:
        return np.zeros((0, 2), dtype=np.int64)
    return v[starts[-1] + 1 : pos].reshape(-1, 2)


def _pt(p: np.ndarray) -> str:
    return f"({int(p[0])}, {int(p[1])})"


def check_polygon(vertices: np.ndarray) -> Polygon:
    """Check every rule on one polygon.

    Args:
        vertices: [m, 2] integer vertices in order.

    Returns:
        The polygon with its corner edges.

    Raises:
        OutputRejected: Naming the first broken rule.
    """
    v = np.asarray(vertices, dtype=np.int64)
    m = v.shape[0]
    if not MIN_VERTICES <= m <= MAX_VERTICES:
        raise OutputRejected("vertex-count", f"{m} vertices; need {MIN_VERTICES} <= m <= {MAX_VERTICES}")
    out_of_range = ((v < 0) | (v > COORD_MAX)).any(axis=1)
    if out_of_range.any():
        i = int(np.argmax(out_of_range))
        raise OutputRejected(
            "coordinate-range", f"vertex {i} = {_pt(v[i])} lies outside [0, {COORD_MAX}] x [0, {COORD_MAX}]"
        )
    keys = v[:, 0] * (COORD_MAX + 1) + v[:, 1]
    order = np.argsort(keys, kind="stable")
    dup = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    if dup.size:
        i, j = sorted((int(order[dup[0]]), int(order[dup[0] + 1])))
        raise OutputRejected("distinct-vertices", f"vertices {i} and {j} are both {_pt(v[i])}")
    d = np.roll(v, -1, axis=0) - v  # edge i runs from vertex i to vertex i + 1 (mod m)
    diagonal = (d[:, 0] != 0) & (d[:, 1] != 0)
    if diagonal.any():
        i = int(np.argmax(diagonal))
        raise OutputRejected(
            "axis-parallel",
            f"edge {i} from {_pt(v[i])} to {_pt(v[(i + 1) % m])} is neither horizontal nor vertical",
        )
    perimeter = int(np.abs(d).sum())
    if perimeter > MAX_PERIMETER:
        raise OutputRejected("perimeter", f"total edge length {perimeter} exceeds {MAX_PERIMETER}")

    horizontal = d[:, 1] == 0
    step = np.sign(d[:, 0] + d[:, 1])
    same_line = horizontal == np.roll(horizontal, 1)
    back = same_line & (step != np.roll(step, 1))
    if back.any():
        i = int(np.argmax(back))
        raise OutputRejected(
            "self-intersection",
            f"edges {(i - 1) % m} and {i} meet at vertex {i} = {_pt(v[i])} and run back over each other",
        )
    corner_idx = np.flatnonzero(~same_line)
    k = corner_idx.size
    if k < 4:  # a closed chain without reversals always turns at least four times
        raise OutputRejected("self-intersection", "the polygon does not close around any area")
    corners = v[corner_idx]
    nxt = np.roll(corners, -1, axis=0)
    is_h = horizontal[corner_idx]  # corner edge j runs from corner j to corner j + 1
    hs, vs = np.flatnonzero(is_h), np.flatnonzero(~is_h)
    h_y = corners[hs, 1]
    h_lo = np.minimum(corners[hs, 0], nxt[hs, 0])
    h_hi = np.maximum(corners[hs, 0], nxt[hs, 0])
    v_x = corners[vs, 0]
    v_lo = np.minimum(corners[vs, 1], nxt[vs, 1])
    v_hi = np.maximum(corners[vs, 1], nxt[vs, 1])

    for name, line, lo, hi, ids in (("horizontal", h_y, h_lo, h_hi, hs), ("vertical", v_x, v_lo, v_hi, vs)):
        o = np.lexsort((lo, line))
        touch = (line[o][1:] == line[o][:-1]) & (lo[o][1:] <= hi[o][:-1])
        if touch.any():
            t = int(np.argmax(touch))
            a, b = sorted((int(corner_idx[ids[o[t]]]), int(corner_idx[ids[o[t + 1]]])))
            raise OutputRejected(
                "self-intersection", f"two {name} edges (starting at vertices {a} and {b}) overlap or touch"
            )

    # Horizontal / vertical pairs whose x ranges meet: for each horizontal edge, the vertical edges
    # with x in [h_lo, h_hi] form a contiguous run of the x-sorted vertical edges.
    by_x = np.argsort(v_x, kind="stable")
    first = np.searchsorted(v_x[by_x], h_lo, side="left")
    count = np.searchsorted(v_x[by_x], h_hi, side="right") - first
    h_of = np.repeat(np.arange(hs.size), count)
    offset = np.arange(h_of.size) - np.repeat(np.cumsum(count) - count, count)
    v_of = by_x[np.repeat(first, count) + offset]
    hit = (h_y[h_of] >= v_lo[v_of]) & (h_y[h_of] <= v_hi[v_of])
    step_between = (vs[v_of] - hs[h_of]) % k  # perpendicular neighbours meet at their shared corner
    hit &= (step_between != 1) & (step_between != k - 1)
    if hit.any():
        t = int(np.argmax(hit))
        a, b = sorted((int(corner_idx[hs[h_of[t]]]), int(corner_idx[vs[v_of[t]]])))
        raise OutputRejected(
            "self-intersection", f"non-adjacent edges (starting at vertices {a} and {b}) cross or touch"
        )
    return Polygon(v, corners, v_x, v_lo, v_hi, h_y)


@dataclass(frozen=True)
class SortedPoints:
    """The fish of one case, pre-sorted once so that each polygon is located in linear time."""

    x: np.ndarray
    """[P] x coordinates in ascending order."""
    y_of_x: np.ndarray
    """[P] y coordinates, in the same (x-sorted) order."""
    mackerel: np.ndarray
    """[P] bool, in x-sorted order: is this point a mackerel?"""
    y: np.ndarray
    """[P] y coordinates in ascending order."""
    y_to_x: np.ndarray
    """[P] for the k-th point in y order, its position in x order."""
    x_to_input: np.ndarray
    """[P] for the k-th point in x order, its index in the input."""


def sort_points(x: np.ndarray, y: np.ndarray, mackerel: np.ndarray) -> SortedPoints:
    """Pre-sort a point set (once per case)."""
    xo = np.argsort(x, kind="stable")
    yo = np.argsort(y, kind="stable")
    pos_in_x = np.empty_like(xo)
    pos_in_x[xo] = np.arange(xo.size)
    return SortedPoints(x[xo], y[xo], mackerel[xo], y[yo], pos_in_x[yo], xo)


def points_of(inst: Instance) -> SortedPoints:
    """The sorted fish of a case; mackerels are the first N points."""
    return sort_points(inst.x, inst.y, np.arange(2 * inst.n) < inst.n)


def _lines_below(lines: np.ndarray, sorted_values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For ascending values: how many grid lines lie strictly below each, and is it on a line."""
    upto = np.searchsorted(sorted_values, lines, side="right")  # values <= each line
    below = np.repeat(np.arange(lines.size + 1), np.diff(upto, prepend=0, append=sorted_values.size))
    on = lines[np.minimum(below, lines.size - 1)] == sorted_values
    return below, on


def inside_sorted(poly: Polygon, pts: SortedPoints) -> np.ndarray:
    """Inside-or-on-boundary mask of the points, in x-sorted order."""
    xs = np.unique(poly.vx)
    ys = np.unique(poly.hy)
    width = ys.size + 1
    a = np.searchsorted(xs, poly.vx)
    b = np.searchsorted(ys, poly.vy_lo)
    c = np.searchsorted(ys, poly.vy_hi)
    size = xs.size * width
    diff = np.bincount(a * width + b, minlength=size) - np.bincount(a * width + c, minlength=size)
    cover = diff.reshape(xs.size, width).cumsum(axis=1)  # edges at xs[i] spanning slab j
    parity = ((cover.cumsum(axis=0) & 1) == 1).ravel()  # cell right of xs[i], slab j: inside?

    bx, on_x = _lines_below(xs, pts.x)
    by_sorted, on_y_sorted = _lines_below(ys, pts.y)
    by = np.empty_like(by_sorted)
    by[pts.y_to_x] = by_sorted
    on_y = np.empty_like(on_y_sorted)
    on_y[pts.y_to_x] = on_y_sorted
    # Cell just right of / just above the point: index (lines at or below it) - 1.
    ix = bx - 1 + on_x
    iy = by - 1 + on_y
    result = (ix >= 0) & (iy >= 0) & parity[np.maximum(ix, 0) * width + np.maximum(iy, 0)]
    edge = np.flatnonzero((on_x | on_y) & ~result)  # on a grid line: also look left / below
    if edge.size:
        ex_r, ey_r = ix[edge], iy[edge]
        ex_l, ey_l = bx[edge] - 1, by[edge] - 1
        extra = np.zeros(edge.size, dtype=bool)
        for i, j in ((ex_l, ey_l), (ex_l, ey_r), (ex_r, ey_l)):
            extra |= (i >= 0) & (j >= 0) & parity[np.maximum(i, 0) * width + np.maximum(j, 0)]
        result[edge] = extra
    return result


def inside(poly: Polygon, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boolean mask of the points inside the polygon or on its boundary (input order)."""
    x = np.asarray(x, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    pts = sort_points(x, y, np.zeros(x.shape, dtype=bool))
    out = np.empty(x.shape, dtype=bool)
    out[pts.x_to_input] = inside_sorted(poly, pts)
    return out


def polygon_score(pts: SortedPoints, poly: Polygon) -> int:
    """``max(0, a - b + 1)`` for a checked polygon."""
    mask = inside_sorted(poly, pts)
    a = int(np.count_nonzero(mask & pts.mackerel))
    b = int(np.count_nonzero(mask)) - a
    return max(0, a - b + 1)


def case_score(pts: SortedPoints, stdout: bytes) -> int:
    """Score one case's output (``pts`` from :func:`points_of`).

    An output without any polygon scores 1: the official tester scores the empty polygon
    (no edge to check, no fish inside) as ``0 - 0 + 1``.

    Raises:
        OutputRejected: If any polygon breaks a reading rule, or the last one a geometric rule.
    """
    vertices = last_polygon(stdout)
    if vertices.shape[0] == 0:
        return 1
    return polygon_score(pts, check_polygon(vertices))
