"""The bandit test instrument's trusted scorer: payoff table, arm rule and output validation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from environments.selftest_bandit.scorer import (
    MAX_CHARS,
    PAYOFF,
    BanditScorer,
    arm_of,
    payoff,
    validate_choice,
)
from harness.envs.registry import default_registry
from harness.evaluation.errors import CandidateInvalid
from harness.scoring.api import CallResult


class _Returns:
    """Trusted-side stand-in for the sandbox runtime: ``call("choose")`` returns a fixed value."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.calls: list[str] = []

    def call(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        self.calls.append(function)
        return CallResult(self.value, 0.001)


def _score(value: Any) -> tuple[float, dict[str, float]]:
    scorer = BanditScorer(default_registry().get("selftest-bandit"), Path("/nonexistent"))
    runtime = _Returns(value)
    out = scorer.score(runtime)  # type: ignore[arg-type]
    assert runtime.calls == ["choose"]
    return out.score, out.metrics


def test_payoff_table_by_hand() -> None:
    assert PAYOFF == (0.3, 0.0, 0.5, 0.1, 0.6, 0.2, 0.4, 1.0)
    best = max(range(8), key=lambda a: PAYOFF[a])
    assert best == 7 and sorted(PAYOFF)[-2] == 0.6  # unique best, clear margin
    assert sorted(PAYOFF[:7]) == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6]


@pytest.mark.parametrize(
    ("choice", "arm", "score"),
    [
        ("a", 1, 0.0),  # the initial program: 97 % 8 = 1
        ("g", 7, 1.0),
        ("good", 7, 1.0),
        ("o", 7, 1.0),
        ("W", 7, 1.0),
        ("7", 7, 1.0),
        ("h", 0, 0.3),  # 104 % 8 = 0
        ("b", 2, 0.5),
        ("c", 3, 0.1),
        ("d", 4, 0.6),
        ("e", 5, 0.2),
        ("f", 6, 0.4),
        (" g", 0, 0.3),  # no stripping: the space (32) decides
        ("\ng", 2, 0.5),  # newline is 10
        ("\u00ff", 7, 1.0),  # 255 % 8 = 7
        ("\U0001f600x", 0, 0.3),  # 128512 % 8 = 0; one code point, not bytes
    ],
)
def test_arm_rule_by_hand(choice: str, arm: int, score: float) -> None:
    assert arm_of(choice) == arm and payoff(choice) == score
    got, metrics = _score(choice)
    assert got == score and metrics == {"score": score, "arm": float(arm), "length": float(len(choice))}


def test_empty_string_is_valid_and_worst() -> None:
    assert arm_of("") is None
    assert _score("") == (0.0, {"score": 0.0, "arm": -1.0, "length": 0.0})


@pytest.mark.parametrize("value", [None, 7, 7.0, b"g", ["g"], {"g": 1}, ("g",)])
def test_non_str_is_invalid(value: Any) -> None:
    with pytest.raises(CandidateInvalid, match="must return a str"):
        _score(value)


def test_str_subclass_is_invalid_even_if_it_reaches_the_scorer() -> None:
    class Liar(str):
        def __getitem__(self, i: Any) -> str:  # type: ignore[override]
            return "g"

    with pytest.raises(CandidateInvalid, match="must return a str, got Liar"):
        validate_choice(Liar("a"))


def test_length_limit() -> None:
    assert _score("g" * MAX_CHARS)[0] == 1.0
    with pytest.raises(CandidateInvalid, match="at most 10000"):
        _score("g" * (MAX_CHARS + 1))


@given(st.text(max_size=200))
def test_any_string_scores_the_table_entry_of_its_first_character(s: str) -> None:
    score, metrics = _score(s)
    assert math.isfinite(score) and score in PAYOFF
    if s:
        assert metrics["arm"] == ord(s[0]) % 8 and score == PAYOFF[ord(s[0]) % 8]
        assert _score(s[0] + "zzz")[0] == score  # only the first character matters
    else:
        assert score == 0.0 and metrics["arm"] == -1.0


def _score8(value: Any) -> float:
    scorer = BanditScorer(default_registry().get("selftest-bandit-8"), Path("/nonexistent"))
    return scorer.score(_Returns(value)).score  # type: ignore[arg-type]


def test_eight_positions_by_hand() -> None:
    assert _score8("gggggggg") == 1.0
    assert _score8("gggggggg and the rest is ignored") == 1.0
    assert _score8("g") == 1.0 / 8  # seven missing characters pay 0.0
    assert _score8("") == 0.0
    assert _score8("gggggggd") == pytest.approx((7 * 1.0 + 0.6) / 8)


@given(st.text(max_size=40))
def test_eight_positions_are_the_mean_of_one_position_rules(s: str) -> None:
    expected = sum(payoff(s[i:]) if i < len(s) else 0.0 for i in range(8)) / 8
    assert _score8(s) == pytest.approx(expected, abs=1e-12)
    assert payoff(s, 1) == payoff(s)  # one position is the original rule
    assert 0.0 <= _score8(s) <= 1.0
