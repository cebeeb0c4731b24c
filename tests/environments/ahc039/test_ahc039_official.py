"""AHC039 judge against the official tester's reading and scoring rules, on every kind of output.

``official_score`` below is a second, deliberately plain implementation of what the official Rust
tester does (UTF-8 text, Unicode-whitespace tokens, Rust integer parsing, every polygon range
checked, the last one validated edge pair by edge pair and scored point by point; no polygon at
all is the empty polygon, score 1). The judge must give the same score on any output.
"""

from __future__ import annotations

import re

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from environments.ahc039.data import Instance
from environments.ahc039.judge import case_score, points_of
from environments.ahc_common.parsing import OutputRejected

D = 100_000
RUST_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
RUST_SPACE += "\u2028\u2029\u202f\u205f\u3000"
_INT = re.compile(r"[+-]?[0-9]+")


# -- the reference -------------------------------------------------------------------------------
def official_score(fish: list[tuple[int, int]], n: int, data: bytes) -> int:
    """Score (0 when wrong) of an output, following the official tester's rules step by step."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return 0
    tokens = re.split(f"[{RUST_SPACE}]+", text)
    tokens = [t for t in tokens if t]
    polygons: list[list[tuple[int, int]]] = []
    k = 0

    def number(lo: int, hi: int) -> int | None:
        nonlocal k
        if k >= len(tokens) or not _INT.fullmatch(tokens[k]):
            return None
        value = int(tokens[k])
        k += 1
        return value if lo <= value <= hi else None

    while k < len(tokens):
        m = number(4, 1000)
        if m is None:
            return 0
        poly = []
        for _ in range(m):
            x, y = number(0, D), number(0, D)
            if x is None or y is None:
                return 0
            poly.append((x, y))
        polygons.append(poly)
    poly = polygons[-1] if polygons else []
    m = len(poly)
    length = 0
    for i in range(m):
        p, q, r = poly[i], poly[(i + 1) % m], poly[(i + 2) % m]
        if p == q:
            return 0
        if p[0] == q[0]:
            length += abs(p[1] - q[1])
            if q[0] == r[0] and (p[1] - q[1]) * (r[1] - q[1]) > 0:
                return 0
        elif p[1] == q[1]:
            length += abs(p[0] - q[0])
            if q[1] == r[1] and (p[0] - q[0]) * (r[0] - q[0]) > 0:
                return 0
        else:
            return 0
    for i in range(m):
        for step in range(2, m - 1):
            j = (i + step) % m
            (a, b), (c, d) = (poly[i], poly[(i + 1) % m]), (poly[j], poly[(j + 1) % m])
            if max(min(a[0], b[0]), min(c[0], d[0])) <= min(max(a[0], b[0]), max(c[0], d[0])) and max(
                min(a[1], b[1]), min(c[1], d[1])
            ) <= min(max(a[1], b[1]), max(c[1], d[1])):
                return 0
    if length > 4 * D:
        return 0
    score = 1
    for idx, (fx, fy) in enumerate(fish):
        inside = False
        for i in range(m):
            p, q = poly[i], poly[(i + 1) % m]
            x0, x1, y0, y1 = min(p[0], q[0]), max(p[0], q[0]), min(p[1], q[1]), max(p[1], q[1])
            if x0 <= fx <= x1 and y0 <= fy <= y1:
                inside = True
                break
            if p[1] == q[1] and p[1] > fy and x0 <= fx < x1:
                inside = not inside
        if inside:
            score += 1 if idx < n else -1
    return max(score, 0)


def ours(inst: Instance, data: bytes) -> int:
    try:
        return case_score(points_of(inst), data)
    except OutputRejected:
        return 0


# -- a small sea and random outputs ----------------------------------------------------------------
def small_sea(seed: int, n: int = 30, size: int = 12) -> Instance:
    """Mackerels mostly in the middle of a small grid, sardines anywhere on it."""
    rng = np.random.default_rng(seed)
    middle = [(x, y) for x in range(3, 9) for y in range(3, 9)]
    taken = [middle[i] for i in rng.choice(len(middle), size=n, replace=False)]
    rest = [(x, y) for x in range(size) for y in range(size) if (x, y) not in set(taken)]
    taken += [rest[i] for i in rng.choice(len(rest), size=n, replace=False)]
    pts = np.array(taken, dtype=np.int64)
    return Instance(n, pts[:, 0].copy(), pts[:, 1].copy())


SEA = small_sea(39)
FISH = list(zip(SEA.x.tolist(), SEA.y.tolist(), strict=True))


@st.composite
def chains(draw: st.DrawFn, size: int = 12) -> list[tuple[int, int]]:
    """Closed rectilinear chains on a small grid: often simple, often not, sometimes collinear."""
    k = draw(st.integers(2, 6))
    xs = draw(st.lists(st.integers(0, size), min_size=k, max_size=k))
    ys = draw(st.lists(st.integers(0, size), min_size=k, max_size=k))
    v = [p for i in range(k) for p in ((xs[i], ys[i]), (xs[(i + 1) % k], ys[i]))]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(v) - 1))
        a, b = v[i], v[(i + 1) % len(v)]
        v.insert(i + 1, ((a[0] + b[0]) // 2, (a[1] + b[1]) // 2))
    if draw(st.integers(0, 9)) == 0:  # a coordinate out of range somewhere
        i = draw(st.integers(0, len(v) - 1))
        v[i] = (v[i][0], draw(st.sampled_from([-1, D + 1, -(2**63), 2**63 - 1])))
    return v


@st.composite
def skylines(draw: st.DrawFn, size: int = 12) -> list[tuple[int, int]]:
    """Simple polygons: bars of random heights on a common floor (two bars may share a height)."""
    xs = sorted(draw(st.sets(st.integers(0, size), min_size=2, max_size=6)))
    floor = draw(st.integers(0, 3))
    tops = [draw(st.integers(floor + 1, size)) for _ in xs[1:]]
    v = [(xs[0], floor), (xs[-1], floor)]
    for i in range(len(tops) - 1, -1, -1):
        v += [(xs[i + 1], tops[i]), (xs[i], tops[i])]
    return v


@st.composite
def integer_text(draw: st.DrawFn, value: int) -> str:
    """``value`` as the tester would accept it: optional '+', leading zeros, '-0'."""
    digits = "0" * draw(st.sampled_from([0, 0, 0, 1, 3, 40])) + str(abs(value))
    sign = "-" if value < 0 else draw(st.sampled_from(["", "", "", "+"] + (["-"] if value == 0 else [])))
    return sign + digits


@st.composite
def outputs(draw: st.DrawFn) -> bytes:
    """Zero to three polygons, with the counts sometimes off, odd spacing and stray tokens."""
    polys = draw(st.lists(st.one_of(chains(), skylines()), max_size=3))
    parts: list[str] = []
    for v in polys:
        m = len(v) + draw(st.sampled_from([0] * 12 + [-1, 1]))
        parts.append(draw(integer_text(m)))
        parts += [draw(integer_text(c)) for p in v for c in p]
    if draw(st.integers(0, 11)) == 0:
        parts.insert(
            draw(st.integers(0, len(parts))),
            draw(
                st.sampled_from(
                    ["x", "1.0", "1_0", "+-1", "--1", "+", "\ufeff4", "99999999999999999999", "1\x1c"]
                )
            ),
        )
    seps = draw(
        st.lists(
            st.sampled_from([" ", "\n", " ", "\r\n", "\t", "\xa0", "\u3000", "\x85"]),
            min_size=len(parts) + 1,
            max_size=len(parts) + 1,
        )
    )
    text = seps[0] + "".join(p + s for p, s in zip(parts, seps[1:], strict=True))
    data = text.encode()
    if draw(st.integers(0, 29)) == 0:
        data += b"\xff"
    return data


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(outputs())
def test_judge_agrees_with_the_official_rules_on_random_outputs(data: bytes) -> None:
    assert ours(SEA, data) == official_score(FISH, SEA.n, data)


def text_of(polys: list[list[tuple[int, int]]]) -> bytes:
    return "".join(f"{len(v)}\n" + "".join(f"{x} {y}\n" for x, y in v) for v in polys).encode()


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(chains(), skylines()), min_size=1, max_size=3), st.data())
def test_reformatting_integers_never_changes_the_score(
    polys: list[list[tuple[int, int]]], data: st.DataObject
) -> None:
    plain = text_of(polys)
    fancy = " ".join(data.draw(integer_text(int(t))) for t in plain.split()).encode()
    assert ours(SEA, fancy) == ours(SEA, plain) == official_score(FISH, SEA.n, plain)


@settings(max_examples=100, deadline=None)
@given(st.lists(chains(), min_size=1, max_size=3), st.data())
def test_a_coordinate_out_of_range_in_any_polygon_scores_zero(
    polys: list[list[tuple[int, int]]], data: st.DataObject
) -> None:
    k = data.draw(st.integers(0, len(polys) - 1))
    i = data.draw(st.integers(0, len(polys[k]) - 1))
    x, y = polys[k][i]
    polys[k][i] = (x, data.draw(st.sampled_from([-1, D + 1, 10**6]))) if data.draw(st.booleans()) else (-1, y)
    assert ours(SEA, text_of(polys)) == 0


# -- the cases a user found ----------------------------------------------------------------------
BOX = [(2, 2), (9, 2), (9, 9), (2, 9)]


def test_an_earlier_polygon_out_of_range_makes_the_case_wrong() -> None:
    assert ours(SEA, text_of([BOX])) > 0
    assert ours(SEA, text_of([[(0, 0), (D + 1, 0), (D + 1, 5), (0, 5)], BOX])) == 0
    assert ours(SEA, text_of([[(0, -1), (5, -1), (5, 5), (0, 5)], BOX])) == 0
    # only the range is checked on earlier polygons: a self-crossing one is fine
    crossing = [(0, 5), (10, 5), (10, 10), (5, 10), (5, 0), (0, 0)]
    assert ours(SEA, text_of([crossing, BOX])) == ours(SEA, text_of([BOX]))


def test_rust_integer_formats_are_accepted() -> None:
    plain = ours(SEA, text_of([BOX]))
    assert plain > 0
    assert ours(SEA, b"+4 +2 0002 9 2 0000009 +09 2\n0009") == plain
    assert ours(SEA, b"+4 +2 0002 9 2 0000009 +09 -02\n0009") == 0  # -2 is out of range
    assert ours(SEA, b"4 " + b"0" * 5000 + b"2 2 9 2 9 9 2 9") == plain  # long, but only leading zeros
    assert ours(SEA, b"4 0 -0 5 -0 5 5 0 5") == official_score(FISH, SEA.n, b"4 0 0 5 0 5 5 0 5")
    for bad in (b"4 2 2 9 2 9 9 2 +-9", b"4 2 2 9 2 9 9 2 9.0", b"4 2 2 9 2 9 9 2 9_0", b"4 2 2 9 2 9 9 2 +"):
        assert ours(SEA, bad) == 0, bad


def test_unicode_whitespace_separates_and_bytes_must_be_utf8() -> None:
    plain = ours(SEA, text_of([BOX]))
    assert ours(SEA, "4\u3000 2\xa02\u20289 2\x859 9 2\t9\x0b".encode()) == plain
    assert ours(SEA, b"4 2 2 9 2 9 9 2 9\x1c") == 0  # U+001C is not whitespace to Rust
    assert ours(SEA, b"4 2 2 9 2 9 9 2 9 \xff") == 0  # not UTF-8


def test_an_output_without_polygons_scores_one() -> None:
    for empty in (b"", b"\n", b" \r\n\t", "\u3000".encode()):
        assert ours(SEA, empty) == 1 == official_score(FISH, SEA.n, empty)
