"""AHC058 judge: hand-worked plans, one crafted violation per rule, batch = exact simulation."""

from __future__ import annotations

import math

import numpy as np
import pytest

from environments.ahc058.data import Instance, generate
from environments.ahc058.scorer import judge_outputs
from environments.ahc058.simulate import (
    case_score,
    parse_actions,
    simulate_batch,
    simulate_exact,
)
from environments.ahc_common.parsing import OutputRejected


def inst(a: list[int], c: list[list[int]], turns: int, apples: int) -> Instance:
    return Instance(len(a), len(c), turns, apples, np.array(a, dtype=np.int64), np.array(c, dtype=np.int64))


def plan(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def score(instance: Instance, stdout: bytes) -> int | OutputRejected:
    (verdict,) = judge_outputs([instance], [stdout])
    return verdict


# N = 2, L = 2, T = 4, K = 10; A = (1, 3); C = ((2, 5), (10, 20)).
SMALL = inst([1, 3], [[2, 5], [10, 20]], turns=4, apples=10)


def test_hand_worked_plan() -> None:
    # turn 0: "0 1" pays 5 (10 -> 5), P01 = 1; level 0 makes 3 * 1 * 1 = 3        -> 8
    # turn 1: "0 0" pays 2 (8 -> 6),  P00 = 1; level 0 makes 1 + 3 = 4            -> 10
    # turn 2: "1 0" pays 10 (-> 0),   P10 = 1; level 0 makes 4 (-> 4); B00 += 1 -> 2
    # turn 3: nothing;                         level 0 makes 1 * 2 * 1 + 3 = 5   -> 9
    out = plan("0 1", "0 0", "1 0", "-1")
    assert simulate_exact(SMALL, parse_actions(out, SMALL)) == 9
    assert score(SMALL, out) == 316993  # round(1e5 * log2(9)) = round(316992.50014...)
    assert case_score(9) == math.floor(1e5 * math.log2(9) + 0.5)


def test_levels_use_the_counts_from_before_the_step() -> None:
    # N = 1, L = 3, T = 3, K = 100, A = 1, every C = 1.
    three = inst([1], [[1], [1], [1]], turns=3, apples=100)
    # turn 0: "2 0" (-> 99); P2 = 1; level 2 adds B2 * P2 = 1 to B1        -> B1 = 2
    # turn 1: "1 0" (-> 98); P1 = 1; level 1 adds B1 * P1 = 2 to B0 (B1 still 2, level 2 runs
    #          after level 1)                                               -> B0 = 3, B1 = 3
    # turn 2: "0 0" (-> 97); P0 = 1; level 0 adds 1 * B0 * P0 = 3          -> 100 apples
    out = plan("2 0", "1 0", "0 0")
    assert simulate_exact(three, parse_actions(out, three)) == 100
    assert score(three, out) == round(1e5 * math.log2(100))  # 664386


def test_comments_and_blank_lines_are_ignored() -> None:
    out = b"# plan for SMALL\n0 1\n\n   # indented comment: 9 9 9\n0 0\r\n1 0\n#\n-1\n# trailing\n"
    assert score(SMALL, out) == 316993


def test_doing_nothing_keeps_the_start_apples() -> None:
    assert score(SMALL, plan(*["-1"] * 4)) == case_score(10) == round(1e5 * math.log2(10))


def test_score_is_zero_when_no_apple_is_left() -> None:
    broke = inst([1], [[1], [1]], turns=1, apples=1)
    assert simulate_exact(broke, parse_actions(plan("1 0"), broke)) == 0  # paid 1, level 1 makes machines
    assert score(broke, plan("1 0")) == 0
    assert case_score(1) == 0 and case_score(0) == 0


VIOLATIONS = {
    "too-few-actions": (plan("0 1", "0 0", "-1"), "action-count"),
    "empty": (b"", "action-count"),
    "level-out-of-range": (plan("2 0", "-1", "-1", "-1"), "machine-range"),
    "id-out-of-range": (plan("0 2", "-1", "-1", "-1"), "machine-range"),
    "negative-id": (plan("0 -1", "-1", "-1", "-1"), "format"),
    "minus-zero-id": (plan("0 -0", "-1", "-1", "-1"), "format"),
    "three-numbers": (plan("0 1 1", "-1", "-1", "-1"), "format"),
    "minus-one-with-extra": (plan("-1 0", "-1", "-1", "-1"), "format"),
    "level-without-id": (plan("0", "-1", "-1", "-1"), "format"),
    "level-below-minus-one": (plan("-2", "-1", "-1", "-1"), "machine-range"),
    "words": (plan("strengthen 0 1", "-1", "-1", "-1"), "format"),
    "binary": (b"\x00\xff\n-1\n-1\n-1\n", "utf-8"),
    "nul": (b"\x00\n-1\n-1\n-1\n", "format"),
    "huge-number": (plan("0 99999999999999999999", "-1", "-1", "-1"), "machine-range"),
    "pays-too-much": (plan("0 1", "0 0", "1 1", "-1"), "apples"),  # turn 2: 20 > 10
}


@pytest.mark.parametrize("name", sorted(VIOLATIONS))
def test_each_rule_rejects_its_violation(name: str) -> None:
    stdout, rule = VIOLATIONS[name]
    verdict = score(SMALL, stdout)
    assert isinstance(verdict, OutputRejected), verdict
    assert verdict.rule == rule and f"rule '{rule}'" in str(verdict)


def test_pays_too_much_names_the_turn() -> None:
    verdict = score(SMALL, plan("0 1", "0 0", "1 1", "-1"))
    assert isinstance(verdict, OutputRejected)
    assert "turn 2" in verdict.detail and "costs 20" in verdict.detail and "10 are held" in verdict.detail


def random_plan(instance: Instance, rng: np.random.Generator) -> np.ndarray:
    """Mostly affordable random purchases (found with the exact simulator), some unaffordable."""
    acts = np.full((instance.turns, 2), -1, dtype=np.int64)
    for t in range(instance.turns):
        if rng.random() < 0.6:
            acts[t] = (
                int(rng.integers(0, instance.levels)) if rng.random() < 0.4 else 0,
                rng.integers(0, instance.n),
            )
            try:
                simulate_exact(
                    Instance(instance.n, instance.levels, t + 1, instance.apples, instance.a, instance.c),
                    acts[: t + 1],
                )
            except OutputRejected:
                if rng.random() < 0.97:
                    acts[t] = (-1, -1)
    return acts


def test_batch_simulation_matches_the_exact_one() -> None:
    rng = np.random.default_rng(58)
    instances = [generate(seed) for seed in range(12)]
    instances = [Instance(x.n, x.levels, 60, x.apples, x.a, x.c) for x in instances]  # short games
    rich = instances[0]
    instances.append(Instance(rich.n, rich.levels, rich.turns, 2**62, rich.a, rich.c))  # near 2^63
    plans = [random_plan(x, rng) for x in instances]
    batch = simulate_batch(instances, plans)
    for x, p, got in zip(instances, plans, batch, strict=True):
        try:
            want: int | str = simulate_exact(x, p)
        except OutputRejected as e:
            want = str(e)
        assert (str(got) if isinstance(got, OutputRejected) else got) == want
    assert any(isinstance(v, int) and v > 1000 for v in batch)
    assert any(isinstance(v, OutputRejected) and v.rule == "apples" for v in batch)
    assert isinstance(batch[-1], int) and batch[-1] > 2**61
