"""Parsing of role answers: tolerant of noise, strict about what is accepted."""

from __future__ import annotations

import pytest

from agents.pacevolve.parsing import (
    ParseError,
    parse_classification,
    parse_drop,
    parse_edit,
    parse_ideas,
    parse_repeat,
    parse_selection,
    parse_summary,
)

PROGRAM = """import math

# EVOLVE-BLOCK-START
def f(x):
    return 2.5 * x + 1
# EVOLVE-BLOCK-END
"""
NEW_BODY = "def f(x):\n    return 3.0 * x + 1\n"
NEW_PROGRAM = PROGRAM.replace("2.5", "3.0")


def test_ideas_with_noise() -> None:
    text = """<think>Let me think about the pool... Hypothesis: not this one</think>
Sure! Here are my ideas:

**Idea 1**
**Hypothesis:** Use a min-heap over pack loads
so that the lightest pack is found in log time.
**Reasoning:** greedy is slow.

### Idea 2
- Hypothesis: Replicate by marginal gain.
Reasoning: balances better.

Idea 3
Hypothesis: use a min-heap over pack loads so that the lightest pack is found in log time.
"""
    ideas = parse_ideas(text, 5)
    assert ideas == [
        "Use a min-heap over pack loads so that the lightest pack is found in log time.",
        "Replicate by marginal gain.",
    ]
    assert parse_ideas(text, 1) == ideas[:1]


@pytest.mark.parametrize(
    "text", ["", "I would rather not.", "Hypothesis:   \nReasoning: x", "Hypothesis: abc"]
)
def test_ideas_rejected(text: str) -> None:
    with pytest.raises(ParseError):
        parse_ideas(text, 3)


def test_classification_variants() -> None:
    refine = parse_classification(
        "**Idea exists:** Yes.\n**Idea ID:** 2\nDescription: merged text.", {1, 2}, set()
    )
    assert (refine.kind, refine.idea_id, refine.description) == ("refine", 2, "merged text.")
    new = parse_classification("```\nIdea exists: no\nDescription: A new idea.\n```", {1}, set())
    assert (new.kind, new.idea_id) == ("new", None)
    known = parse_classification("Idea exists: abandoned\nIdea ID: 7", {1}, {7})
    assert (known.kind, known.idea_id) == ("known_failure", 7)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Description: something", "Idea exists"),
        ("Idea exists: maybe\nDescription: x", "Idea exists"),
        ("Idea exists: yes\nIdea ID: 9\nDescription: x", "not in the pool"),
        ("Idea exists: yes\nDescription: x", "must give a number"),
        ("Idea exists: yes\nIdea ID: 1", "Description"),
        ("Idea exists: no", "Description"),
        ("Idea exists: abandoned\nIdea ID: 1", "not an abandoned idea"),
    ],
)
def test_classification_rejected(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_classification(text, {1, 2}, {7})


def test_selection() -> None:
    s = parse_selection(
        "I pick this.\n\n**Idea ID**: #3\n**Hypothesis**: Replace the greedy loop by a heap.", {3}
    )
    assert (s.idea_id, s.hypothesis) == (3, "Replace the greedy loop by a heap.")
    s2 = parse_selection("Idea ID: 3\nExperiment description: try a heap of loads", {3})
    assert s2.hypothesis == "try a heap of loads"


@pytest.mark.parametrize(
    "text",
    [
        "Idea ID: 4\nHypothesis: something long enough",
        "Idea ID: 3\nHypothesis:",
        "Hypothesis: only a hypothesis",
        "",
    ],
)
def test_selection_rejected(text: str) -> None:
    with pytest.raises(ParseError):
        parse_selection(text, {3})


def test_edit_diff_with_prose_and_fences() -> None:
    text = (
        "Here is the change.\n\n```diff\n<<<<<<< SEARCH\n    return 2.5 * x + 1\n=======\n"
        "    return 3.0 * x + 1\n>>>>>>> REPLACE\n```\nThis should help."
    )
    assert parse_edit(text, PROGRAM, "python") == NEW_PROGRAM


def test_edit_full_program_fenced_or_bare() -> None:
    fenced = f"New version:\n```python\n{NEW_PROGRAM}```\nDone."
    assert parse_edit(fenced, PROGRAM, "python") == NEW_PROGRAM
    assert parse_edit(NEW_PROGRAM.rstrip("\n"), PROGRAM, "python") == NEW_PROGRAM
    thinking = "<think>```python\n# EVOLVE-BLOCK-START\nbad\n```</think>" + fenced
    assert parse_edit(thinking, PROGRAM, "python") == NEW_PROGRAM


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no SEARCH/REPLACE"),
        ("I changed the constant to 3.0.", "no SEARCH/REPLACE"),
        ("```python\ndef f(x):\n    return 3.0 * x\n```", "no SEARCH/REPLACE"),
        ("<<<<<<< SEARCH\n    return 2.5 * x + 1\n>>>>>>> REPLACE\n", "malformed"),
        ("<<<<<<< SEARCH\n    return 9 * x\n=======\n    return 1\n>>>>>>> REPLACE\n", "not found"),
        ("<<<<<<< SEARCH\nimport math\n=======\nimport os\n>>>>>>> REPLACE\n", "fixed text"),
        (
            "<<<<<<< SEARCH\n    return 2.5 * x + 1\n=======\n    return 2.5 * x + 1\n>>>>>>> REPLACE\n",
            "unchanged",
        ),
        (f"```python\n{NEW_PROGRAM.replace('import math', 'import os')}```", "outside EVOLVE-BLOCKs"),
        (f"Sure, here it is:\n{NEW_PROGRAM}", "outside EVOLVE-BLOCKs"),
    ],
)
def test_edit_rejected(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_edit(text, PROGRAM, "python")


def test_summary_drop_repeat() -> None:
    s = parse_summary("Description: Heaps for packing.\nFindings: best 0.74; heaps help,\nsorting does not.")
    assert s.description == "Heaps for packing." and s.findings == "best 0.74; heaps help, sorting does not."
    with pytest.raises(ParseError):
        parse_summary("Description: only this")
    assert parse_drop("Drop: [2, 5, 2]\nReason: stale", {1, 2, 5}, 3) == ([2, 5], "stale")
    assert parse_drop("**Dropping Ideas:** [5, 2]", {2, 5}, 1) == ([5], "")
    for bad in ("Drop: []", "Drop: [9]", "nothing"):
        with pytest.raises(ParseError):
            parse_drop(bad, {1, 2}, 1)
    assert parse_repeat("Repeat: Yes.") is True
    assert parse_repeat("**Repeat:** no") is False
    with pytest.raises(ParseError):
        parse_repeat("Repeat: perhaps")
