"""``offline/exact`` (not an LLM) applies exactly the edit a hypothesis names (issue 22 item 1)."""

from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agents.pacevolve  # noqa: F401 - registers offline/exact
from agents.learning.answer_formats import view_edits
from agents.pacevolve import prompting
from agents.pacevolve.offline_exact import respond
from agents.pacevolve.parsing import parse_edit
from agents.pacevolve.roles import IslandView, Selection
from agents.pacevolve.state import Idea
from harness.envs.registry import default_registry
from harness.evaluation.result import program_sha256
from harness.llm.offline import parse_offline_prompt, register_operators
from harness.llm.offline.vocabulary import (
    apply_named_edit,
    edit_key,
    hypothesis_key,
    render_vocabulary,
    untried,
    vocabulary,
)
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


def _options(entries: list[Any]) -> list[tuple[str, int]]:
    return [(e.name, o.number) for e in entries for o in e.options]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_untried_leaves_out_exactly_the_tried_and_known_and_keeps_numbers(data: st.DataObject) -> None:
    view = _view("eplb-tiny")
    lang, ops = view.task.language.value, view.task.mutations
    full = vocabulary(view.program, lang, ops)
    every = _options(full)
    tried_opts = data.draw(st.sets(st.sampled_from(every)))
    known_opts = data.draw(st.sets(st.sampled_from(every)))
    programs = {(n, k): apply_named_edit(view.program, lang, ops, f"edit {n} {k}").program for n, k in every}
    tried = {hypothesis_key(f"edit {n} {k}") for n, k in tried_opts}
    known = {program_sha256(programs[o] or "") for o in known_opts}
    offered = untried(full, view.program, tried, known)
    assert set(_options(offered)) == set(every) - tried_opts - known_opts
    for entry in offered:
        for option in entry.options:  # the number offered is the number the implementer applies
            out = view.program[: option.start] + option.new + view.program[option.end :]
            assert programs[(entry.name, option.number)] == out


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["add-term", "scale-literal", "swap_comparison"]), st.integers(1, 999), st.text())
def test_free_text_after_a_named_edit_is_not_part_of_its_key(name: str, n: int, junk: str) -> None:
    """``edit add-term 4 <random bytes>`` and ``edit add-term 4`` are one experiment (issue 35 item 4)."""
    key = edit_key(f"edit {name} {n}")
    assert edit_key(f"edit {name} {n} {junk}") == key
    assert edit_key(f"  EDIT `{name}` #{n:03d}\t{junk}") == key
    assert edit_key(f"edit {name} {n + 1} {junk}") != key


def test_the_view_leaves_out_an_edit_tried_with_free_text_after_it() -> None:
    """What the island's log names with free text is neither offered nor decodable again."""
    view = _view("eplb-tiny")
    logged = "edit swap-comparison 1 x\x07?? because the plan is lopsided"
    view = dataclasses.replace(view, tried=frozenset({edit_key(logged)}))
    offered, left_out = view.edits()
    assert left_out == 1 and ("swap-comparison", 1) not in _options(offered)
    fmt = view_edits(view)
    assert fmt is not None and not re.fullmatch(fmt, "edit swap-comparison 1")
    assert re.fullmatch(fmt, "edit swap-comparison 2")


def test_the_view_offers_untried_edits_in_prompt_and_grammar() -> None:
    """A repeat the filter would skip, or a program already evaluated, is neither shown nor decodable."""
    view = _view("eplb-tiny")
    lang, ops = view.task.language.value, view.task.mutations
    again = apply_named_edit(view.program, lang, ops, "edit packing-order 2").program
    assert again is not None
    view = dataclasses.replace(
        view,
        tried=frozenset({hypothesis_key("edit swap-comparison 1")}),
        known=frozenset({program_sha256(again)}),
    )
    offered, left_out = view.edits()
    assert left_out == 2
    names = _options(offered)
    assert ("swap-comparison", 1) not in names and ("packing-order", 2) not in names
    assert ("packing-order", 1) in names and ("swap-comparison", 2) in names
    prompt = prompting.idea_selection(view)[-1]["content"]
    assert "edit packing-order 1:" in prompt and "edit packing-order 2:" not in prompt
    assert "2 already tried here are not listed" in prompt
    grammar = re.compile(view_edits(view) or "")
    assert grammar.fullmatch("edit packing-order 1") and grammar.fullmatch("edit swap-comparison 2")
    assert not grammar.fullmatch("edit packing-order 2") and not grammar.fullmatch("edit swap-comparison 1")
