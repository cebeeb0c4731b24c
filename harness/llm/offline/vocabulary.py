"""A published vocabulary of edits and the deterministic implementer that applies exactly one.

An environment's mutation operators become a small list of numbered edits of the current
program, rendered into the advisor's prompt (:func:`render_vocabulary`). A hypothesis names one
as ``edit <name> <n>``; :func:`apply_named_edit` applies exactly that edit (no randomness), or
says that the hypothesis names none. So, without an LLM, what the advisor writes decides the
program: different named edits give different programs, the same one the same program.

Entries:

* every :class:`~harness.program.mutate.ReplaceSnippet` whose snippet occurs in a block: option
  ``n`` writes its ``n``-th alternative (those differing from the snippet) at the first occurrence;
* ``scale-literal``: options ``2j-1`` / ``2j`` double / halve the ``j``-th numeric literal of the
  blocks (decimal ints and floats, at most :data:`MAX_LITERALS`);
* ``swap-comparison``: option ``j`` swaps the ``j``-th comparison (``<`` with ``<=``, ``>`` with
  ``>=``; at most :data:`MAX_COMPARISONS`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from harness.evaluation.result import program_sha256
from harness.program import ProgramFormatError, parse_program
from harness.program.lexer import scan
from harness.program.mutate import ReplaceSnippet

MAX_LITERALS = 4
"""Numeric literals offered by ``scale-literal`` (the first ones in the blocks)."""
MAX_COMPARISONS = 4
"""Comparisons offered by ``swap-comparison``."""
MAX_SHOWN = 60
"""Characters of an option's description in the prompt."""
_NAMED = re.compile(r"\bedit\s+`?([A-Za-z0-9_.\-]+)`?\s*(?:#|no\.?|option)?\s*(\d{1,3})\b", re.IGNORECASE)
_SWAPPED = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_DECIMAL = re.compile(r"^(\d+)(\.\d*)?([eE][-+]?\d+)?$")


@dataclass(frozen=True)
class Option:
    """One numbered edit: replace ``[start, end)`` of the program with ``new``."""

    start: int
    """Offset of the replaced text in the program."""
    end: int
    """End offset (exclusive)."""
    new: str
    """Replacement text."""
    shown: str
    """What the prompt says the option does."""
    number: int = 0
    """Its number in its entry (``edit <name> <number>``; from 1, kept when others are left out)."""


@dataclass(frozen=True)
class Entry:
    """A named edit with its numbered options (option ``n`` is ``options[n - 1]``)."""

    name: str
    """The name a hypothesis writes after ``edit``."""
    options: tuple[Option, ...]
    """The options, numbered from 1."""


@dataclass(frozen=True)
class NamedEdit:
    """The outcome of :func:`apply_named_edit`."""

    program: str | None
    """The edited program, or None when the hypothesis names no applicable edit."""
    name: str
    """``<name> <n>`` of the applied edit ("" when none)."""
    reason: str
    """Why no edit was made ("" when one was)."""


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _scaled(literal: str, up: bool) -> str | None:
    m = _DECIMAL.match(literal)
    if m is None or (len(m.group(1)) > 1 and m.group(1).startswith("0") and not m.group(2)):
        return None  # hex, suffixed, octal-looking or complex literals stay as they are
    if m.group(2) is None and m.group(3) is None:
        value = int(literal)
        return str(value * 2 if up else value // 2)
    return repr(float(literal) * 2 if up else float(literal) / 2)


def vocabulary(program: str, language: str, operators: Sequence[object]) -> list[Entry]:
    """The edits that apply to ``program``, in a fixed order (environment operators first).

    Args:
        program: Program text with EVOLVE-BLOCK markers.
        language: ``python`` or ``cpp``.
        operators: The environment's operators (``TaskSpec.mutations``); only
            :class:`ReplaceSnippet` ones become entries (the generic ones are always added).

    Returns:
        The entries (empty for a malformed program or an unsupported language).
    """
    try:
        parsed = parse_program(program, language)
        tokens = scan(program, language)
    except (ProgramFormatError, ValueError):
        return []

    def inside(start: int, end: int) -> bool:
        return any(seg.start <= start and end <= seg.end for seg in parsed.blocks)

    entries: list[Entry] = []
    for op in operators:
        if not isinstance(op, ReplaceSnippet):
            continue
        site = next(
            (seg.start + seg.text.find(op.search) for seg in parsed.blocks if op.search in seg.text), None
        )
        if site is None:
            continue
        alternatives = [r for r in op.replacements if r != op.search]
        options = tuple(
            Option(site, site + len(op.search), r, " ".join(r.split())[:MAX_SHOWN]) for r in alternatives
        )
        entries.append(Entry(op.name, options))
    literals: list[Option] = []
    comparisons: list[Option] = []
    for tok in tokens:
        if not inside(tok.start, tok.end):
            continue
        if tok.kind == "comparison" and len(comparisons) < MAX_COMPARISONS:
            new = _SWAPPED[tok.text]
            where = f"line {_line(program, tok.start)}"
            comparisons.append(Option(tok.start, tok.end, new, f"{where}: `{tok.text}` -> `{new}`"))
        elif tok.kind == "number" and len(literals) < 2 * MAX_LITERALS:
            up, down = _scaled(tok.text, True), _scaled(tok.text, False)
            if up is None or down is None or down == tok.text:
                continue
            where = f"line {_line(program, tok.start)}"
            literals.append(Option(tok.start, tok.end, up, f"{where}: {tok.text} -> {up}"))
            literals.append(Option(tok.start, tok.end, down, f"{where}: {tok.text} -> {down}"))
    if literals:
        entries.append(Entry("scale-literal", tuple(literals)))
    if comparisons:
        entries.append(Entry("swap-comparison", tuple(comparisons)))
    # Two names for one program would make the advisor's choice ambiguous: keep the first.
    seen: set[str] = set()
    unique: list[Entry] = []
    for entry in entries:
        kept = []
        for o in entry.options:
            out = program[: o.start] + o.new + program[o.end :]
            if out not in seen:
                seen.add(out)
                kept.append(o)
        if kept:
            unique.append(Entry(entry.name, tuple(replace(o, number=n) for n, o in enumerate(kept, start=1))))
    return unique


def untried(
    entries: Sequence[Entry], program: str, tried: Collection[str], known: Collection[str]
) -> list[Entry]:
    """The entries without the options a search would waste: already tried, or known programs.

    An option is left out when its key ``edit <name> <n>`` (:func:`edit_key`) is in ``tried``,
    or when the program it writes has a sha256 in ``known``. The other options keep their numbers,
    so :func:`apply_named_edit` on the full vocabulary applies what was offered.

    Args:
        entries: The vocabulary of ``program`` (:func:`vocabulary`).
        program: The program the entries edit.
        tried: Keys (:func:`edit_key`) of the hypotheses already tried (e.g. an island's log).
        known: sha256 (hex) of programs already evaluated.

    Returns:
        The entries that keep at least one option, in their order.
    """
    out: list[Entry] = []
    for entry in entries:
        kept = tuple(
            o
            for o in entry.options
            if edit_key(f"edit {entry.name} {o.number}") not in tried
            and program_sha256(program[: o.start] + o.new + program[o.end :]) not in known
        )
        if kept:
            out.append(Entry(entry.name, kept))
    return out


def hypothesis_key(text: str) -> str:
    """Lower-cased words only (case, spacing and punctuation do not count)."""
    return " ".join(re.findall(r"[a-z0-9_]+", text.lower()))


def edit_key(text: str) -> str:
    """The key under which two hypotheses count as the same experiment: the edit they name.

    A hypothesis that names an edit (its first ``edit <name> <n>``, read as
    :func:`apply_named_edit` reads it) is keyed by that edit alone: ``edit add-term 4``,
    ``Edit `add-term` #04`` and ``edit add-term 4 <any free text>`` are one experiment, since
    the implementer applies the same edit for each. Free text is not part of the key. A
    hypothesis that names no edit is keyed by its words (:func:`hypothesis_key`).

    The first named edit is the key even when it is not in the vocabulary and the implementer
    applies a later one; a constrained advisor's hypothesis starts with a published edit, so
    there the two agree.
    """
    m = _NAMED.search(text)
    if m is None:
        return hypothesis_key(text)
    return hypothesis_key(f"edit {m.group(1)} {int(m.group(2))}")


def render_vocabulary(entries: Sequence[Entry], left_out: int = 0) -> str:
    """The vocabulary as the advisor's prompt shows it (one line per option).

    Args:
        entries: The options to show.
        left_out: How many options were left out as already tried (said in the text when > 0).
    """
    note = f" ({left_out} already tried here are not listed)" if left_out else ""
    if not entries:
        return f"(no numbered edits apply to this program{note})"
    lines = [
        f"Name at most one edit in the hypothesis as `edit <name> <n>`, e.g. `edit scale-literal 1`{note}:"
    ]
    for entry in entries:
        for option in entry.options:
            lines.append(f"- edit {entry.name} {option.number}: {option.shown}")
    return "\n".join(lines)


def apply_named_edit(program: str, language: str, operators: Sequence[object], hypothesis: str) -> NamedEdit:
    """Apply exactly the edit the hypothesis names (the first valid ``edit <name> <n>`` in it).

    Args:
        program: Program text with EVOLVE-BLOCK markers.
        language: ``python`` or ``cpp``.
        operators: The environment's operators.
        hypothesis: The advisor's text.

    Returns:
        The edit; ``program`` is None, with the reason, when the text names no applicable edit
        or the edit would change text outside the blocks.
    """
    entries = {e.name.lower(): e for e in vocabulary(program, language, operators)}
    for m in _NAMED.finditer(hypothesis):
        entry = entries.get(m.group(1).lower())
        n = int(m.group(2))
        if entry is None or not 1 <= n <= len(entry.options):
            continue
        option = entry.options[n - 1]
        out = program[: option.start] + option.new + program[option.end :]
        try:
            before = parse_program(program, language).fixed_texts
            same_fixed = parse_program(out, language).fixed_texts == before
        except (ProgramFormatError, ValueError):
            same_fixed = False
        if not same_fixed:
            return NamedEdit(None, "", f"edit {entry.name} {n} would change text outside the blocks")
        return NamedEdit(out, f"{entry.name} {n}", "")
    return NamedEdit(None, "", "the hypothesis names no edit of the published vocabulary")
