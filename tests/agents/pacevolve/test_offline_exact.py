"""``offline/exact`` (not an LLM) applies exactly the edit a hypothesis names (issue 22 item 1)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agents.pacevolve  # noqa: F401 - registers offline/exact
from agents.pacevolve import prompting
from agents.pacevolve.offline_exact import respond
from agents.pacevolve.parsing import parse_edit
from agents.pacevolve.roles import IslandView, Selection
from agents.pacevolve.state import Idea
from harness.envs.registry import default_registry
from harness.llm.offline import parse_offline_prompt, register_operators
from harness.llm.offline.vocabulary import apply_named_edit, render_vocabulary, vocabulary
from harness.runner.runner import task_spec


def _view(env: str) -> IslandView:
    task = task_spec(default_registry().get(env))
    register_operators(task.env_id, list(task.mutations))  # what the agent does at start
    return IslandView(
        task=task, island=0, step=1, seed=5, program=task.initial_program, program_score=0.0,
        best_score=0.0, ideas=(Idea(id=1, description="Balance the hot experts."),), pruned=(), log=(),
    )  # fmt: skip


def _implement(view: IslandView, hypothesis: str, seed: int = 0) -> str | None:
    """The program ``offline/exact`` writes for a hypothesis, or None when it answers "No edit"."""
    msgs: list[Any] = prompting.implementation(view, view.ideas[0], Selection(1, hypothesis))
    answer = respond(parse_offline_prompt(msgs), random.Random(seed))
    if "No edit:" in answer:
        return None
    return parse_edit(answer, view.program, view.task.language.value)


TINY = [
    "ahc039-tiny", "ahc058-tiny", "eplb-tiny", "kuairec-tiny", "llm-sr-tiny",
    "mla-decode-tiny", "multi-evolve-tiny", "selftest-tiny", "trimul-tiny",
]  # fmt: skip
"""Every tiny variant except kernelbench-tiny, whose block has no operator site, literal or comparison."""


def test_kernelbench_tiny_publishes_no_edit_and_says_so() -> None:
    view = _view("kernelbench-tiny")
    assert vocabulary(view.program, "python", view.task.mutations) == []
    assert "(no numbered edits apply" in prompting.idea_selection(view)[-1]["content"]
    assert _implement(view, "edit scale-literal 1") is None


@pytest.mark.parametrize("env", TINY)
def test_each_published_edit_gives_its_own_program_and_repeats_exactly(env: str) -> None:
    view = _view(env)
    entries = vocabulary(view.program, view.task.language.value, view.task.mutations)
    assert entries, "every family offers at least the generic edits"
    programs: dict[str, str] = {}
    for entry in entries:
        for n in range(1, len(entry.options) + 1):
            text = f"Try edit {entry.name} {n}; it should lower the imbalance."
            out = _implement(view, text, seed=1)
            assert out is not None and out != view.program
            # Same hypothesis -> same program, whatever the request seed or the wording around it.
            assert _implement(view, text, seed=2) == out
            assert _implement(view, f"edit {entry.name.upper()} {n}", seed=3) == out
            programs[f"{entry.name} {n}"] = out
    # Different named edits -> different programs (options replacing the same text are distinct).
    assert len(set(programs.values())) == len(programs)


def test_gibberish_and_unknown_edits_get_no_edit() -> None:
    view = _view("eplb-tiny")
    for text in ("qwzx blorp", ".", "edit nothing-like-this 1", "edit packing-order 99", "make it faster"):
        assert _implement(view, text) is None
    msgs = prompting.implementation(view, view.ideas[0], Selection(1, "qwzx blorp"))
    answer = respond(parse_offline_prompt(msgs), random.Random(0))
    assert "No edit: the hypothesis names no edit of the published vocabulary" in answer


def test_the_advisor_prompts_publish_the_vocabulary() -> None:
    view = _view("eplb-tiny")
    text = render_vocabulary(vocabulary(view.program, "python", view.task.mutations))
    assert "edit packing-order 1" in text and "edit swap-comparison 1" in text
    for msgs in (prompting.idea_selection(view), prompting.idea_generation(view, 1, 0)):
        assert text in msgs[-1]["content"]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_text_without_an_edit_name_never_edits(text: str) -> None:
    view = _view("eplb-tiny")
    if "edit" in text.lower():
        return
    out = apply_named_edit(view.program, "python", view.task.mutations, text)
    assert out.program is None and out.reason
