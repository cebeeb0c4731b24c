"""Mutation operators the offline proposer draws its code edits from, and the side channel that supplies them.

Operators are Python objects, so they cannot travel inside a prompt. An agent registers its
environment's operators once per run with :func:`register_operators` (keyed by the variant id
that the prompt's ``Environment`` header names); :func:`operators_for` returns them together with
the generic numeric and comparison operators of :mod:`harness.program.mutate`. An unregistered
environment gets the generic operators only.

An environment may also register operators that read the hypothesis
(:class:`~harness.llm.offline.hypothesis.HypothesisMutation`); :func:`propose_edit` skips those that
cannot edit without one (no ``apply``), and the implementer of an agent applies them explicitly.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from harness.program import (
    Mutation,
    PatchError,
    ProgramFormatError,
    generic_operators,
    make_diff,
    render_diff,
)

from .hypothesis import Operator, edit_operators

_lock = threading.Lock()
_OPERATORS: dict[str, tuple[Operator, ...]] = {}


def register_operators(env_id: str, operators: Sequence[Operator]) -> None:
    """Make an environment's task-specific operators available to the offline proposer.

    Args:
        env_id: Variant id, as written in the prompt's ``Environment`` header.
        operators: The environment's operators (``TaskSpec.mutations``); replaces earlier ones.
    """
    with _lock:
        _OPERATORS[env_id] = tuple(operators)


def operators_for(env_id: str) -> list[Operator]:
    """The environment's registered operators followed by the generic ones.

    Args:
        env_id: Variant id ("" or unknown: generic operators only).

    Returns:
        Fresh list of operators; names are unique (an environment operator shadows a generic one).
    """
    with _lock:
        specific = list(_OPERATORS.get(env_id, ()))
    names = {op.name for op in specific}
    generic: list[Operator] = [op for op in generic_operators() if op.name not in names]
    return specific + generic


@dataclass(frozen=True)
class OfflineEdit:
    """An edit produced by applying operators to a program."""

    operators: tuple[str, ...]
    """Names of the operators applied, in order."""
    program: str
    """The edited program."""
    diff: str
    """The edit as SEARCH/REPLACE hunks (``render_diff`` format)."""


def propose_edit(
    program: str,
    language: str,
    rng: random.Random,
    operators: Sequence[Operator],
    prefer: str | None = None,
    extra_ops: int = 0,
) -> OfflineEdit | None:
    """Apply one operator (``prefer`` first when it applies) plus up to ``extra_ops`` random ones.

    Args:
        program: Program text with EVOLVE-BLOCK markers.
        language: ``python`` or ``cpp``.
        rng: Source of randomness.
        operators: Operators to choose from; those without ``apply`` (hypothesis-only) are skipped.
        prefer: Name of the operator to try first.
        extra_ops: Further random operators stacked on the first.

    Returns:
        The edit, or None when no operator changes the program (or the program is malformed).
    """
    ops: list[Mutation] = edit_operators(operators)
    if not ops:
        return None
    try:
        order = [op for op in ops if op.name == prefer]
        rest = [op for op in ops if op.name != prefer]
        rng.shuffle(rest)
        applied: list[str] = []
        current = program
        for op in order + rest:
            out = op.apply(current, rng, language)
            if out is not None and out != current:
                applied.append(op.name)
                current = out
                break
        if not applied:
            return None
        for _ in range(extra_ops):
            op = rng.choice(ops)
            out = op.apply(current, rng, language)
            if out is not None and out != current:
                applied.append(op.name)
                current = out
        diff = render_diff(make_diff(program, current, language))
    except (ProgramFormatError, PatchError, ValueError):
        return None
    return OfflineEdit(tuple(applied), current, diff)
