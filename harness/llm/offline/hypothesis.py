"""Operators that implement a free-text hypothesis instead of a random edit (used by test instruments).

The offline proposer normally ignores what a hypothesis says and applies a random operator. An
environment may also offer operators that *read* the hypothesis: a :class:`HypothesisMutation`
turns the hypothesis text into an edit of the program. The offline implementer of PACEvolve
(``offline/pacevolve``) tries them first, so a trained advisor's words reach the program without
an LLM in between. Test instruments such as ``selftest-bandit`` use this to make the score a
function of the advisor's text alone.

Such an operator needs a hypothesis, so random searches (which have none) skip it unless it also
has an ``apply`` method; :func:`edit_operators` and :func:`hypothesis_operators` split a mixed
operator list.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, TypeAlias, runtime_checkable

from harness.program import Mutation, ProgramFormatError, parse_program


@runtime_checkable
class HypothesisMutation(Protocol):
    """A named operator that edits a program's EVOLVE-BLOCKs according to a hypothesis text."""

    @property
    def name(self) -> str:
        """Short identifier used in logs and in the implementer's answer."""
        ...

    def apply_hypothesis(self, program: str, hypothesis: str, language: str) -> str | None:
        """Return the program edited to implement ``hypothesis``, or None when it does not apply."""
        ...


Operator: TypeAlias = Mutation | HypothesisMutation
"""Anything an environment's ``mutations`` function may return."""


def edit_operators(operators: Iterable[object]) -> list[Mutation]:
    """The operators that can edit a program without a hypothesis (those with ``apply``)."""
    return [op for op in operators if isinstance(op, Mutation)]


def hypothesis_operators(operators: Iterable[object]) -> list[HypothesisMutation]:
    """The operators that read a hypothesis (those with ``apply_hypothesis``)."""
    return [op for op in operators if isinstance(op, HypothesisMutation)]


def _top_level_assignments(tree: ast.Module, variable: str) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == variable for t in targets):
            out.append(node)
    return out


def set_python_assignment(program: str, variable: str, literal: str) -> str | None:
    """Make a Python program assign ``literal`` to the module-level ``variable`` inside a block.

    The last top-level assignment to ``variable`` is replaced when its lines lie inside one
    EVOLVE-BLOCK body and hold no other statement; when the program has no top-level assignment
    to it at all, ``variable = literal`` is appended to the last block body. Text outside the
    bodies never changes.

    Args:
        program: Python program text with EVOLVE-BLOCK markers.
        variable: Name of the module-level variable.
        literal: Python expression source of the new value (e.g. ``repr(text)``); one line.

    Returns:
        The edited program (possibly equal to ``program``), or None when the program is not valid
        Python, has malformed or no markers, or assigns the variable outside the bodies only.

    Raises:
        ValueError: If ``literal`` spans more than one line.
    """
    if "\n" in literal:
        raise ValueError("the literal must be one line")
    try:
        parsed = parse_program(program, "python")
        tree = ast.parse(program)
    except (ProgramFormatError, SyntaxError, ValueError):
        return None
    if not parsed.blocks:
        return None
    lines = program.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    new_line = f"{variable} = {literal}"
    found = _top_level_assignments(tree, variable)
    if found:
        node = found[-1]
        end_lineno = node.end_lineno or node.lineno
        shared = [
            other
            for other in tree.body
            if other is not node
            and other.lineno <= end_lineno
            and (other.end_lineno or other.lineno) >= node.lineno
        ]
        if node.col_offset != 0 or shared:
            return None  # e.g. "x = 1; CHOICE = 'a'": rewriting whole lines would drop code
        lo, hi = starts[node.lineno - 1], starts[end_lineno] - 1  # hi: the newline of the last line
        seg = parsed.block_at(lo)
        if seg is None or not (seg.start <= lo and min(hi + 1, len(program)) <= seg.end):
            return None
        result = program[:lo] + new_line + program[hi:]
    else:
        last = parsed.blocks[-1]
        body = last.text
        sep = "" if not body or body.endswith("\n") else "\n"
        result = program[: last.end] + sep + new_line + "\n" + program[last.end :]
    try:
        after = parse_program(result, "python")
        ast.parse(result)
    except (ProgramFormatError, SyntaxError, ValueError):
        return None
    return result if after.fixed_texts == parsed.fixed_texts else None


def string_literal(text: str) -> str:
    r"""A one-line Python literal for ``text``: ``repr`` with every ``<`` written as ``\x3c``.

    ``repr`` escapes line breaks and quotes, so the literal cannot break the program; escaping
    ``<`` keeps answer cleaners that drop ``<think>...</think>`` spans from altering it on its
    way through an implementer's reply. ``ast.literal_eval`` of the result gives back ``text``.
    """
    return repr(text).replace("<", "\\x3c")


@dataclass(frozen=True)
class AssignHypothesis:
    """A :class:`HypothesisMutation` that stores the hypothesis text in a string variable.

    ``variable = <literal of hypothesis.strip()[:max_chars]>`` is written inside the EVOLVE-BLOCK
    (see :func:`set_python_assignment` and :func:`string_literal`); the literal keeps the program
    valid whatever the text holds.

    Attributes:
        name: Operator name.
        variable: Module-level variable that receives the text.
        max_chars: The stripped hypothesis is cut to this many characters.
    """

    name: str
    variable: str
    max_chars: int = 64

    def __post_init__(self) -> None:
        """Check the variable name and the length cap.

        Raises:
            ValueError: If ``variable`` is not an identifier or ``max_chars`` is below 1.
        """
        if not self.variable.isidentifier():
            raise ValueError(f"AssignHypothesis {self.name!r}: {self.variable!r} is not an identifier")
        if self.max_chars < 1:
            raise ValueError(f"AssignHypothesis {self.name!r}: max_chars must be at least 1")

    def value(self, hypothesis: str) -> str:
        """The text stored for a hypothesis: surrounding whitespace stripped, cut to ``max_chars``."""
        return hypothesis.strip()[: self.max_chars]

    def apply_hypothesis(self, program: str, hypothesis: str, language: str) -> str | None:
        """Write the hypothesis text into the variable.

        Args:
            program: Program text with EVOLVE-BLOCK markers.
            hypothesis: The hypothesis, as the advisor wrote it.
            language: Only ``python`` is supported.

        Returns:
            The edited program, or None for other languages or programs the edit cannot be made in.
        """
        if language != "python":
            return None
        return set_python_assignment(program, self.variable, string_literal(self.value(hypothesis)))
