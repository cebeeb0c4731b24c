"""AHC058 judge against the official tester's reading and scoring rules, on every kind of output.

``official_score`` below is a second, deliberately plain implementation of what the official Rust
tester does: UTF-8 text, lines trimmed of Unicode whitespace, blank and ``#`` lines skipped,
``i`` read as an ``i32`` in [-1, L-1] and ``j`` as a ``usize`` in [0, N-1], reading stopped at the
T-th action, then the game played in wrapping 64-bit arithmetic. The judge must give the same
score on any output.
"""

from __future__ import annotations

import math
import re
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from environments.ahc058.data import Instance, generate
from environments.ahc058.scorer import judge_outputs
from environments.ahc058.simulate import case_score, parse_actions, simulate_batch, simulate_exact

RUST_SPACE = "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
RUST_SPACE += "\u2028\u2029\u202f\u205f\u3000"
_SIGNED = re.compile(r"[+-]?[0-9]+")
_UNSIGNED = re.compile(r"\+?[0-9]+")


def i64(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


# -- the reference -------------------------------------------------------------------------------
def official_score(inst: Instance, data: bytes) -> int:
    """Score (0 when wrong) of a plan, following the official tester's rules step by step."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return 0
    plan: list[tuple[int, int] | None] = []
    for line in text.split("\n"):
        line = line.strip(RUST_SPACE)
        if line == "" or line.startswith("#"):
            continue
        tokens = [t for t in re.split(f"[{RUST_SPACE}]+", line) if t]
        if not _SIGNED.fullmatch(tokens[0]) or not -1 <= int(tokens[0]) <= inst.levels - 1:
            return 0
        level = int(tokens[0])
        if level == -1:
            plan.append(None)
            rest = tokens[1:]
        else:
            if len(tokens) < 2 or not _UNSIGNED.fullmatch(tokens[1]) or not 0 <= int(tokens[1]) < inst.n:
                return 0
            plan.append((level, int(tokens[1])))
            rest = tokens[2:]
        if rest:
            return 0
        if len(plan) == inst.turns:
            break
    if len(plan) < inst.turns:
        return 0
    big_b = [[1] * inst.n for _ in range(inst.levels)]
    big_p = [[0] * inst.n for _ in range(inst.levels)]
    apples = int(inst.apples)
    for action in plan:
        if action is not None:
            i, j = action
            cost = i64(int(inst.c[i][j]) * (big_p[i][j] + 1))
            if apples < cost:
                return 0
            apples = i64(apples - cost)
            big_p[i][j] += 1
        for level in range(inst.levels):
            for k in range(inst.n):
                if level == 0:
                    apples = i64(apples + i64(i64(int(inst.a[k]) * big_b[0][k]) * big_p[0][k]))
                else:
                    big_b[level - 1][k] = i64(big_b[level - 1][k] + i64(big_b[level][k] * big_p[level][k]))
    if apples <= 0:
        return 0
    x = Decimal(1e5 * math.log2(float(apples)))  # the exact value of the f64
    return int(x.quantize(Decimal(1), rounding=ROUND_HALF_UP))  # Rust's f64::round


def ours(inst: Instance, data: bytes) -> int:
    (verdict,) = judge_outputs([inst], [data])
    return verdict if isinstance(verdict, int) else 0


# -- small games and random plans ------------------------------------------------------------------
def game(seed: int, turns: int = 8) -> Instance:
    """A statement-distributed instance cut to a few turns and given enough apples to play."""
    x = generate(seed)
    return Instance(x.n, x.levels, turns, 10**7, x.a, x.c)


GAMES = [game(s) for s in range(3)]
RICH = Instance(2, 2, 6, 2**63 - 50, np.array([2**62, 3]), np.array([[1, 2], [3, 4]]))  # wraps around


@st.composite
def integer_text(draw: st.DrawFn, value: int, unsigned: bool = False) -> str:
    """``value`` as Rust's parser accepts it: optional '+', leading zeros, '-0' when signed."""
    digits = "0" * draw(st.sampled_from([0, 0, 0, 1, 2, 30])) + str(abs(value))
    signs = ["", "", "", "+"] + (["-"] if value == 0 and not unsigned else [])
    return ("-" if value < 0 else draw(st.sampled_from(signs))) + digits


@st.composite
def plans(draw: st.DrawFn, inst: Instance) -> bytes:
    """Plans around T actions long: mostly legal lines, some comments, blanks and broken lines."""
    lines: list[str] = []
    for _ in range(inst.turns + draw(st.sampled_from([0, 0, 0, -1, 1, 3]))):
        kind = draw(st.integers(0, 39))
        if kind == 0:
            lines.append(draw(st.sampled_from(["", "  ", "# note 0 0", "\u3000#x", "\t"])))
        if kind == 1:
            lines.append(
                draw(st.sampled_from(["-1 0", "0", "0 0 0", "0 -0", "4 0", "0 10", "x", "-2", "0 +-1"]))
            )
        elif kind < 14:
            lines.append(draw(integer_text(-1)))
        else:
            level = draw(st.integers(0, inst.levels - 1)) if kind < 18 else 0
            sep = draw(st.sampled_from([" ", " ", "\t", "  ", "\xa0"]))
            ident = draw(integer_text(draw(st.integers(0, inst.n - 1)), unsigned=True))
            lines.append(draw(integer_text(level)) + sep + ident)
    if draw(st.booleans()):
        lines.append(draw(st.text(max_size=20)))  # anything, if it comes after T actions
    return (draw(st.sampled_from(["\n", "\r\n"])).join(lines) + "\n").encode()


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([*GAMES, RICH]).flatmap(lambda g: st.tuples(st.just(g), plans(g))))
def test_judge_agrees_with_the_official_rules_on_random_plans(case: tuple[Instance, bytes]) -> None:
    inst, data = case
    assert ours(inst, data) == official_score(inst, data)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(GAMES).flatmap(lambda g: st.tuples(st.just(g), plans(g))), st.text())
def test_trailing_lines_after_t_actions_never_change_the_score(
    case: tuple[Instance, bytes], tail: str
) -> None:
    inst, data = case
    cut = b"".join(line + b"\n" for line in data.split(b"\n")[: inst.turns])
    assume(all(line.strip() and line.strip()[:1] != b"#" for line in cut.split(b"\n")[:-1]))
    assert ours(inst, cut + tail.encode()) == ours(inst, cut)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(GAMES), st.data())
def test_reformatting_integers_never_changes_the_score(inst: Instance, data: st.DataObject) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32)))
    lines = [
        "0 0",
        *("-1" if rng.random() < 0.5 else f"0 {rng.integers(inst.n)}" for _ in range(inst.turns - 1)),
    ]
    plain = "\n".join(lines).encode()
    fancy = "\n".join(
        " ".join(data.draw(integer_text(int(t), unsigned=k == 1)) for k, t in enumerate(line.split()))
        for line in lines
    ).encode()
    assert ours(inst, fancy) == ours(inst, plain) == official_score(inst, plain)


# -- the cases a user found, and the arithmetic --------------------------------------------------
def greedy_plan(inst: Instance) -> bytes:
    """Strengthen the cheapest affordable level-0 machine every turn (a valid, scoring plan)."""
    a, c0 = inst.a.tolist(), inst.c[0].tolist()
    power, apples, lines = [0] * inst.n, int(inst.apples), []
    for _ in range(inst.turns):
        costs = [c0[j] * (power[j] + 1) for j in range(inst.n)]
        j = min(range(inst.n), key=costs.__getitem__)
        if costs[j] <= apples:
            apples -= costs[j]
            power[j] += 1
            lines.append(f"0 {j}")
        else:
            lines.append("-1")
        apples += sum(a[k] * power[k] for k in range(inst.n))  # level-0 counts stay 1
    return ("\n".join(lines) + "\n").encode()


def test_lines_after_the_t_th_action_are_ignored() -> None:
    inst = generate(3)
    plan = greedy_plan(inst)
    score = ours(inst, plan)
    assert score > 500_000
    assert ours(inst, plan + b"0 0\n-1\n7 7 7\nnot a plan at all \x01\n") == score
    assert ours(inst, plan + "\u00e9\n".encode()) == score
    assert ours(inst, plan + b"\xff\n") == 0  # the whole output must still be UTF-8
    assert ours(inst, plan.rsplit(b"\n", 2)[0]) == 0  # one action short


def test_rust_integer_formats_are_accepted() -> None:
    small = Instance(2, 2, 4, 10, np.array([1, 3]), np.array([[2, 5], [10, 20]]))
    assert ours(small, b"0 1\n0 0\n1 0\n-1\n") == 316993
    assert ours(small, b"+0 +1\n-0 0000\n001\t+0\n-0001\n") == 316993
    assert ours(small, b"0 1\n0 0\n1 -0\n-1\n") == 0  # j is unsigned: not even -0
    assert ours(small, b"0 1\n0 0\n1 0\n-1 0\n") == 0  # nothing may follow -1
    assert ours(small, b"0 1\n0 0\n1 0\n-2\n") == 0
    assert ours(small, "0\u30001\n0\xa00\n 1 0 \n\u2003-1\u2003\n".encode()) == 316993


def test_arithmetic_wraps_around_like_i64() -> None:
    big = Instance(1, 1, 2, 2**63 - 61, np.array([100]), np.array([[1]]))
    # turn 0: pay 1, then make 100: 2^63 - 62 + 100 wraps to -2^63 + 38; turn 1 adds 100 more
    acts = parse_actions(b"0 0\n-1\n", big)
    assert simulate_exact(big, acts) == simulate_batch([big], [acts])[0] == -(2**63) + 138
    assert ours(big, b"0 0\n-1\n") == 0  # no apple left at the end
    near = Instance(1, 1, 2, 2**62 + 5, np.array([100]), np.array([[1]]))
    assert simulate_batch([near], [parse_actions(b"0 0\n-1\n", near)]) == [2**62 + 204]
    assert case_score(2**63 - 1) == 6_300_000  # i64::MAX as f64 is 2^63


def test_batch_and_exact_agree_under_wrap_around() -> None:
    rng = np.random.default_rng(58)
    for _ in range(30):
        inst = Instance(
            3, 3, 12, int(rng.integers(1, 2**62)) * 2, rng.integers(1, 2**40, 3), rng.integers(1, 50, (3, 3))
        )
        acts = np.array(
            [
                (-1, -1) if rng.random() < 0.3 else (int(rng.integers(3)), int(rng.integers(3)))
                for _ in range(12)
            ]
        )
        got = simulate_batch([inst], [acts])[0]
        try:
            want: int | str = simulate_exact(inst, acts)
        except Exception as e:  # noqa: BLE001 - the rejection, compared by message
            want = str(e)
        assert (got if isinstance(got, int) else str(got)) == want
