"""Hypothesis-reading offline operators: the literal, the block-confined assignment, the operator split."""

from __future__ import annotations

import ast
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.llm.offline import (
    AssignHypothesis,
    HypothesisMutation,
    edit_operators,
    hypothesis_operators,
    propose_edit,
    set_python_assignment,
    string_literal,
)
from harness.program import Mutation, ReplaceSnippet, mutate, parse_program

PROGRAM = (
    'import os\n\n# EVOLVE-BLOCK-START\nX = 1\nCHOICE = "a"\n# EVOLVE-BLOCK-END\n'
    "\n\ndef f():\n    return CHOICE\n"
)


def _value(program: str, name: str = "CHOICE") -> object:
    env: dict[str, object] = {}
    exec(compile(program, "<p>", "exec"), env)  # test programs only, built here
    return env[name]


@given(st.text())
def test_string_literal_round_trips_on_one_line_without_angle_brackets(text: str) -> None:
    lit = string_literal(text)
    assert "\n" not in lit and "\r" not in lit and "<" not in lit
    assert ast.literal_eval(lit) == text


def test_assignment_replaced_inside_the_block_only() -> None:
    out = set_python_assignment(PROGRAM, "CHOICE", "'go'")
    assert out == PROGRAM.replace('CHOICE = "a"', "CHOICE = 'go'")
    assert parse_program(out, "python").fixed_texts == parse_program(PROGRAM, "python").fixed_texts


def test_multi_line_assignment_is_replaced_whole() -> None:
    prog = PROGRAM.replace('CHOICE = "a"', 'CHOICE = (\n    "a"\n    "b"\n)')
    out = set_python_assignment(prog, "CHOICE", "'z'")
    assert out is not None and _value(out) == "z" and '"b"' not in out


def test_last_assignment_wins_and_annotated_assignments_count() -> None:
    prog = PROGRAM.replace('CHOICE = "a"', 'CHOICE = "a"\nCHOICE: str = "b"')
    out = set_python_assignment(prog, "CHOICE", "'z'")
    assert out is not None and 'CHOICE = "a"' in out and _value(out) == "z"


def test_missing_assignment_is_appended_to_the_last_block() -> None:
    prog = PROGRAM.replace('CHOICE = "a"\n', "")
    out = set_python_assignment(prog, "CHOICE", "'q'")
    assert out is not None and _value(out) == "q"
    assert parse_program(out, "python").blocks[0].text == "X = 1\nCHOICE = 'q'\n"


@pytest.mark.parametrize(
    "program",
    [
        PROGRAM.replace('CHOICE = "a"\n', "") + 'CHOICE = "a"\n',  # only outside the block
        PROGRAM.replace('CHOICE = "a"', 'X = 2; CHOICE = "a"'),  # shares its line
        PROGRAM.replace("X = 1", "X = ("),  # not Python
        PROGRAM.replace("# EVOLVE-BLOCK-END\n", ""),  # malformed markers
        "CHOICE = 'a'\n",  # no block
    ],
)
def test_refuses_what_it_cannot_do_within_the_block(program: str) -> None:
    assert set_python_assignment(program, "CHOICE", "'z'") is None


def test_literal_must_be_one_line() -> None:
    with pytest.raises(ValueError, match="one line"):
        set_python_assignment(PROGRAM, "CHOICE", "'a'\n'b'")


@given(st.text(max_size=120))
def test_assign_hypothesis_stores_the_stripped_cut_text(hypothesis: str) -> None:
    op = AssignHypothesis("set-choice", "CHOICE", max_chars=64)
    out = op.apply_hypothesis(PROGRAM, hypothesis, "python")
    assert out is not None
    assert _value(out) == hypothesis.strip()[:64]
    assert parse_program(out, "python").fixed_texts == parse_program(PROGRAM, "python").fixed_texts
    assert op.apply_hypothesis(PROGRAM, hypothesis, "cpp") is None


def test_assign_hypothesis_checks_its_arguments() -> None:
    with pytest.raises(ValueError, match="not an identifier"):
        AssignHypothesis("x", "not a name")
    with pytest.raises(ValueError, match="max_chars"):
        AssignHypothesis("x", "CHOICE", max_chars=0)


def test_operator_split_and_random_searches_skip_hypothesis_only_operators() -> None:
    hyp = AssignHypothesis("set-choice", "CHOICE")
    snip = ReplaceSnippet("x", "X = 1", ["X = 2"])
    assert isinstance(hyp, HypothesisMutation) and not isinstance(hyp, Mutation)
    assert edit_operators([hyp, snip]) == [snip] and hypothesis_operators([hyp, snip]) == [hyp]
    rng = random.Random(0)
    assert mutate(PROGRAM, rng, "python", [hyp]) is None
    assert mutate(PROGRAM, rng, "python", [hyp, snip]) == ("x", PROGRAM.replace("X = 1", "X = 2"))
    assert propose_edit(PROGRAM, "python", rng, [hyp]) is None
    edit = propose_edit(PROGRAM, "python", rng, [hyp, snip], prefer="set-choice")
    assert edit is not None and edit.operators == ("x",)
