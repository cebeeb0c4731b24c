"""The family's offline mutation operators produce programs the scorer accepts."""

from __future__ import annotations

import random
from typing import Any

import pytest

from environments.llm_sr.mutations import operators
from environments.llm_sr.scorer import LlmSrScorer
from harness.envs.registry import default_registry
from harness.llm.offline.vocabulary import apply_named_edit

CASES = [(op.name, i) for op in operators() for i in range(len(op.replacements))]


@pytest.fixture(scope="module")
def tiny_scorer(tmp_path_factory: pytest.TempPathFactory) -> LlmSrScorer:
    v = default_registry().get("llm-sr-tiny")
    s = LlmSrScorer(v, tmp_path_factory.mktemp("no-data"))
    s.prepare()
    return s


def test_every_operator_applies_to_the_initial_program() -> None:
    initial = default_registry().get("llm-sr-tiny").initial_program
    for op in operators():
        out = op.apply(initial, random.Random(0), "python")
        assert out is not None and out != initial, op.name


@pytest.mark.parametrize(("name", "index"), CASES, ids=[f"{n}-{i}" for n, i in CASES])
def test_each_replacement_scores(tiny_scorer: LlmSrScorer, fake_runtime: Any, name: str, index: int) -> None:
    v = tiny_scorer.variant
    op = next(o for o in operators() if o.name == name)
    program = v.initial_program.replace(op.search, op.replacements[index])
    assert program != v.initial_program
    out = tiny_scorer.score(fake_runtime(program))
    assert out.metrics["log10_nmse_id"] < 0.5, out.metrics


def test_add_term_chains_and_each_link_is_a_new_program() -> None:
    """``add-term`` applies again to its own output (the vocabulary's only chain)."""
    v = default_registry().get("llm-sr-tiny")
    program = v.initial_program
    seen = {program}
    for n in (4, 5, 1, 6):
        out = apply_named_edit(program, "python", operators(), f"edit add-term {n}").program
        assert out is not None and out not in seen
        seen.add(out)
        program = out
    assert program.count("prediction = prediction + params[") == 4
    assert "return prediction" in program
