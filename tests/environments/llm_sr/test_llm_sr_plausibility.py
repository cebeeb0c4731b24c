"""Rules 'literals' and 'generalisation', and the fit -> prediction phase order, on llm-sr-tiny."""

from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from environments.llm_sr.plausibility import (
    PlausibilityLimits,
    check_generalisation,
    check_source,
    count_source,
)
from environments.llm_sr.scorer import LlmSrScorer
from harness.envs.registry import default_registry
from harness.evaluation.errors import CandidateInvalid

LIMITS = PlausibilityLimits()
HACKS = Path(__file__).resolve().parents[1] / "hacks" / "llm-sr-tiny"


@pytest.fixture(scope="module")
def tiny() -> LlmSrScorer:
    s = LlmSrScorer(default_registry().get("llm-sr-tiny"), Path("/nonexistent"))
    s.prepare()
    return s


def test_initial_program_is_plausible_and_predicts_after_the_fit_is_gone(
    tiny: LlmSrScorer, fake_runtime: Any
) -> None:
    rt = fake_runtime(default_registry().get("llm-sr-tiny").initial_program)
    out = tiny.score(rt)
    assert out.score == pytest.approx(-1.014, abs=1e-3)
    assert rt.ended_calls_before_run and len(rt.runs) == 1


def test_a_table_of_the_test_targets_is_invalid(tiny: LlmSrScorer, fake_runtime: Any) -> None:
    packed = (HACKS / "lookup_packed_string.py").read_text()
    with pytest.raises(CandidateInvalid, match="rule 'size'"):
        tiny.score(fake_runtime(packed))
    # Under a cap large enough to let it run, the gap between train and test_id gives it away.
    roomy = copy.copy(tiny)
    roomy.plausibility = dataclasses.replace(tiny.plausibility, max_compressed_bytes=4096)
    with pytest.raises(CandidateInvalid, match="rule 'generalisation'"):
        roomy.score(fake_runtime(packed))
    with pytest.raises(CandidateInvalid, match="rule 'literals'"):
        tiny.score(fake_runtime((HACKS / "lookup_literals.py").read_text()))


@given(st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=61, max_size=200))
def test_many_numbers_are_a_table(values: list[float]) -> None:
    source = f"import numpy as np\nT = {values!r}\n\ndef equation(x, v, params):\n    return params[0] * x\n"
    counts = count_source(source)
    assert counts is not None and counts.numbers >= len(values)
    with pytest.raises(CandidateInvalid, match="rule 'literals'"):
        check_source(source, LIMITS)


def test_text_counts_strings_numbers_and_comments() -> None:
    counts = count_source("x = 'ab'  # cd\ny = 123\n")
    assert counts is not None and (counts.numbers, counts.text_chars) == (1, len("'ab'") + len("# cd") + 3)
    check_source("# " + "a" * (LIMITS.max_text_chars - 3) + "\n", LIMITS)
    with pytest.raises(CandidateInvalid, match="characters of literals and comments"):
        check_source("# " + "a" * LIMITS.max_text_chars + "\n", LIMITS)
    check_source('s = """unterminated\n', LIMITS)  # does not tokenize: left to the loader to reject


@given(train=st.floats(1e-30, 10.0), gain=st.floats(-5.0, 30.0))
def test_generalisation_limit(train: float, gain: float) -> None:
    test = train / 10.0**gain
    clamped = math.log10(max(train, LIMITS.floor_nmse)) - math.log10(max(test, LIMITS.floor_nmse))
    if clamped > LIMITS.max_test_gain_log10 * (1 + 1e-9):
        with pytest.raises(CandidateInvalid, match="rule 'generalisation'"):
            check_generalisation(train, test, LIMITS)
    elif clamped < LIMITS.max_test_gain_log10 * (1 - 1e-9):
        check_generalisation(train, test, LIMITS)


def test_limits_come_from_the_manifest() -> None:
    p = default_registry().get("llm-sr-osc1").scorer_params
    assert PlausibilityLimits.from_params(p) == LIMITS
    for key in ("max_text_chars", "max_source_chars", "max_canonical_chars", "max_compressed_bytes"):
        with pytest.raises(ValueError, match="positive"):
            PlausibilityLimits.from_params({key: 0})
