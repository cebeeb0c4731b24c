"""Bounded control edits and the safety gates of the slow timescale."""

from __future__ import annotations

import pytest

from agents.pace.control import (
    EDITABLE,
    ImmutableFieldError,
    parse_control_edit,
    safety_violation,
    validate_edit,
)


def test_editable_fields_exist_on_the_scaffold_config() -> None:
    from agents.pacevolve.config import PACEvolveConfig

    assert set(EDITABLE) <= set(PACEvolveConfig.model_fields)


def test_validate_edit_bounds_and_types() -> None:
    assert validate_edit({"max_fix_attempts": 3, "momentum_decay": 0.9, "crossover": False}) == {
        "max_fix_attempts": 3, "momentum_decay": 0.9, "crossover": False,
    }  # fmt: skip
    assert validate_edit({"freeze_period": 4.0}) == {"freeze_period": 4}
    for bad in (
        {"max_fix_attempts": 9},
        {"max_fix_attempts": 1.5},
        {"crossover": "yes"},
        {"momentum_decay": True},
    ):
        with pytest.raises(ValueError) as e:
            validate_edit(bad)
        assert not isinstance(e.value, ImmutableFieldError)


@pytest.mark.parametrize(
    "name", ["islands", "model", "call_llm", "evaluate", "epsilon", "budget", "nonsense"]
)
def test_immutable_and_unknown_fields_are_refused(name: str) -> None:
    with pytest.raises(ImmutableFieldError, match=name):
        validate_edit({name: 1})
    with pytest.raises(ImmutableFieldError):
        parse_control_edit(f'Sure! {{"set": {{"{name}": 1}}, "directive": "x"}}')


def test_parse_json_anywhere_or_free_text() -> None:
    e = parse_control_edit('thinking... {"set": {"max_attempts": 2}, "directive": "Use  a heap."} done')
    assert (e.set, e.directive, e.parse) == ({"max_attempts": 2}, "Use a heap.", "json")
    f = parse_control_edit("\n\n- Replace the greedy loop by a sort.\nmore text")
    assert (f.set, f.directive, f.parse) == ({}, "Replace the greedy loop by a sort.", "free-text")
    with pytest.raises(ValueError):
        parse_control_edit("  \n ")


@pytest.mark.parametrize(
    ("program", "language", "needle"),
    [
        ("import time\ntime.sleep(1)\n", "python", "time.sleep"),
        ("from time import perf_counter, sleep\n", "python", "time.sleep"),
        ("import logging\nx = 1\n", "python", "import logging"),
        ("  from logging import getLogger\n", "python", "import logging"),
        ("def f(:\n    pass\n", "python", "SyntaxError at line 1"),
        ("#include <unistd.h>\nint main(){usleep(5);}\n", "cpp", "sleep"),
        ("int main(){std::this_thread::sleep_for(x);}", "cpp", "sleep"),
    ],
)
def test_safety_gates_block(program: str, language: str, needle: str) -> None:
    assert needle in safety_violation(program, language)


def test_safety_gates_pass_clean_programs() -> None:
    assert (
        safety_violation("import time\nt = time.perf_counter()\n# logging is fine in a comment\n", "python")
        == ""
    )
    assert safety_violation("int main(){return 0;}", "cpp") == ""


@pytest.mark.parametrize(
    ("answer", "directive"),
    [
        ("```python\ndef f(x):\n    return x\n```", "def f(x):"),
        ("```\n`Use a heap` for the queue\n", "Use a heap for the queue"),
        ('{"set": {}, "directive": "```Sort``` the loads"}', "Sort the loads"),
    ],
)
def test_model_garbage_becomes_a_clean_directive(answer: str, directive: str) -> None:
    edit = parse_control_edit(answer)
    assert edit.directive == directive and "`" not in edit.directive


@pytest.mark.parametrize("answer", ["```", "``` \n ```python\n", "---\n12 34\n"])
def test_answers_without_text_are_rejected(answer: str) -> None:
    with pytest.raises(ValueError, match="no control edit"):
        parse_control_edit(answer)
