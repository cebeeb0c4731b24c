"""Apply edits to candidate programs without touching text outside EVOLVE-BLOCKs.

Three edit kinds exist (defined in :mod:`harness.program.edits` and re-exported here):
:class:`FullRewrite` (a whole new program), :class:`BlockRewrite` (a new body for one block) and
:class:`DiffEdit` (SEARCH/REPLACE hunks). :func:`apply_edit` applies any of them and raises
:class:`PatchError` with a message meant to be shown back to the model when the edit is invalid;
:func:`make_diff` builds the hunks that turn one program into another.

A hunk's SEARCH text must occur exactly once in the program (trailing whitespace on each line is
ignored when there is no exact match). It may include unchanged lines outside the block, such as
the marker lines, as context: a hunk is valid when applying it changes the body of at most one
block and leaves every fixed line as it was.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import NoReturn

from .blocks import (
    ParsedProgram,
    ProgramFormatError,
    first_fixed_difference,
    line_at,
    parse_program,
    split_lines,
)
from .edits import BlockRewrite, DiffEdit, Edit, FullRewrite, Hunk, PatchError, parse_diff, render_diff

__all__ = [
    "BlockRewrite",
    "DiffEdit",
    "Edit",
    "FullRewrite",
    "Hunk",
    "PatchError",
    "apply_edit",
    "make_diff",
    "parse_diff",
    "render_diff",
]


def _parse_or_fail(text: str, language: str, what: str) -> ParsedProgram:
    try:
        return parse_program(text, language)
    except ProgramFormatError as exc:
        raise PatchError(f"{what} has malformed EVOLVE-BLOCK markers: {exc}") from exc


def _apply_full_rewrite(old: ParsedProgram, edit: FullRewrite) -> str:
    new = _parse_or_fail(edit.text, old.language, "full rewrite")
    if old.blocks:
        line = first_fixed_difference(old, new)
        if line is not None:
            raise PatchError(f"full rewrite changed text outside EVOLVE-BLOCKs at line {line}")
    return edit.text


def _apply_block_rewrite(old: ParsedProgram, edit: BlockRewrite) -> str:
    if not old.blocks:
        raise PatchError("program has no EVOLVE-BLOCKs; only a full rewrite can edit it")
    try:
        target = old.block(edit.block)
    except KeyError as exc:
        raise PatchError(str(exc.args[0])) from None
    body = edit.body
    if body and not body.endswith("\n"):
        body += "\n"
    text = old.with_bodies([body if seg is target else seg.text for seg in old.blocks])
    new = _parse_or_fail(text, old.language, f"program with the new body of block {edit.block!r}")
    line = first_fixed_difference(old, new)
    if line is not None:
        raise PatchError(f"new body of block {edit.block!r} adds an EVOLVE-BLOCK marker at line {line}")
    return text


def _find_all(text: str, needle: str) -> list[int]:
    """All (possibly overlapping) start offsets of ``needle`` in ``text``."""
    found: list[int] = []
    pos = text.find(needle)
    while pos != -1:
        found.append(pos)
        pos = text.find(needle, pos + 1)
    return found


def _find_loose(text: str, needle: str) -> list[tuple[int, int]]:
    """Spans of whole-line matches of ``needle`` that ignore trailing whitespace on every line."""
    wanted = needle.split("\n")
    ends_with_newline = needle.endswith("\n")
    if ends_with_newline:
        wanted.pop()
    wanted = [w.rstrip() for w in wanted]
    lines = split_lines(text)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    norm = [line.rstrip() for line in lines]
    count = len(wanted)
    spans: list[tuple[int, int]] = []
    for i in range(len(lines) - count + 1):
        if norm[i : i + count] == wanted:
            last = i + count - 1
            end = starts[last + 1] if ends_with_newline else starts[last] + len(lines[last].rstrip("\n"))
            spans.append((starts[i], end))
    return spans


def _locate(text: str, search: str, number: int) -> tuple[int, int]:
    """Find the single span ``search`` matches, exactly or else ignoring trailing whitespace."""
    if not search:
        raise PatchError("SEARCH text is empty", number)
    exact = _find_all(text, search)
    if len(exact) == 1:
        return exact[0], exact[0] + len(search)
    if exact:
        raise PatchError(
            f"SEARCH text found {len(exact)} times; add surrounding lines to make it unique", number
        )
    loose = _find_loose(text, search)
    if len(loose) == 1:
        return loose[0]
    if not loose:
        first = search.split("\n", 1)[0].strip()
        raise PatchError(f"SEARCH text not found (its first line is {first!r})", number)
    raise PatchError(
        f"SEARCH text not found exactly, and found {len(loose)} times when ignoring trailing "
        "whitespace; add surrounding lines to make it unique",
        number,
    )


def _changed_span(old: str, new: str) -> tuple[int, int]:
    """Offsets in ``old`` of the part that differs from ``new`` once common ends are trimmed."""
    limit = min(len(old), len(new))
    head = 0
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return head, len(old) - tail


def _first_fixed_line(old: ParsedProgram, lo: int, hi: int) -> int | None:
    """Line of the first fixed character replaced by a change of ``[lo, hi)``, if any.

    An insertion (``lo == hi``) touches fixed text unless it happens inside or at either end of
    a block body.
    """
    if lo == hi:
        return None if old.block_at(lo) is not None else line_at(old.text, lo)
    for seg in old.fixed:
        first = max(lo, seg.start)
        if first < min(hi, seg.end):
            return line_at(old.text, first)
    return None


def _raise_touched(old: ParsedProgram, result: str, detail: str, number: int) -> NoReturn:
    """Raise the error for a hunk that changed fixed text, naming the first fixed line it hit."""
    head, stop = _changed_span(old.text, result)
    line = _first_fixed_line(old, head, stop)
    if line is not None:
        raise PatchError(f"touches fixed text outside EVOLVE-BLOCK at line {line}", number)
    raise PatchError(f"touches fixed text outside EVOLVE-BLOCK: the new text {detail}", number)


def _apply_hunk(old: ParsedProgram, hunk: Hunk, number: int) -> ParsedProgram:
    text = old.text
    start, end = _locate(text, hunk.search, number)
    result = text[:start] + hunk.replace + text[end:]
    if result == text:
        return old
    try:
        new = parse_program(result, old.language)
    except ProgramFormatError as exc:
        _raise_touched(old, result, f"breaks the EVOLVE-BLOCK markers (result {exc})", number)
    line = first_fixed_difference(old, new)
    if line is not None:
        _raise_touched(old, result, f"adds an EVOLVE-BLOCK marker (result line {line})", number)
    changed = [str(a.block) for a, b in zip(old.blocks, new.blocks, strict=True) if a.text != b.text]
    if len(changed) > 1:
        raise PatchError(
            f"changes more than one EVOLVE-BLOCK (blocks {', '.join(changed)}); use one hunk per block",
            number,
        )
    return new


def apply_edit(program: str, edit: Edit, language: str) -> str:
    """Apply an edit to a program, changing nothing outside its EVOLVE-BLOCKs.

    Args:
        program: The current program text.
        edit: A :class:`FullRewrite`, :class:`BlockRewrite` or :class:`DiffEdit`.
        language: ``"python"`` or ``"cpp"`` (selects the marker comment syntax).

    Returns:
        The edited program.

    Raises:
        ProgramFormatError: If ``program`` itself has malformed markers.
        PatchError: If the edit would change text outside the blocks, names a block that does not
            exist, or (for diffs) a hunk's SEARCH text is empty, not found, or found more than
            once, or a hunk changes two blocks at once. Diff errors name the failing hunk
            (1-based). A program without blocks can only be edited by a full rewrite.
        TypeError: If ``edit`` is not one of the three edit kinds.
        ValueError: If the language is not supported.
    """
    old = parse_program(program, language)
    if isinstance(edit, FullRewrite):
        return _apply_full_rewrite(old, edit)
    if isinstance(edit, BlockRewrite):
        return _apply_block_rewrite(old, edit)
    if not isinstance(edit, DiffEdit):
        raise TypeError(f"expected FullRewrite, BlockRewrite or DiffEdit, got {type(edit).__name__}")
    if not edit.hunks:
        return program
    if not old.blocks:
        raise PatchError("program has no EVOLVE-BLOCKs; only a full rewrite can edit it", 1)
    current = old
    for number, hunk in enumerate(edit.hunks, start=1):
        current = _apply_hunk(current, hunk, number)
    return current.text


def _grouped_changes(
    opcodes: Sequence[tuple[str, int, int, int, int]], gap: int
) -> list[tuple[int, int, int, int]]:
    """Merge changed opcodes separated by fewer than ``gap`` equal lines into single ranges."""
    groups: list[tuple[int, int, int, int]] = []
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            continue
        if groups and i1 - groups[-1][1] < gap:
            groups[-1] = (groups[-1][0], i2, groups[-1][2], j2)
        else:
            groups.append((i1, i2, j1, j2))
    return groups


def _unique_span(lines: list[str], lo: int, hi: int) -> tuple[int, int]:
    """Grow the line range ``[lo, hi)`` alternately upwards and downwards until its text is unique.

    The whole text occurs exactly once, so this always ends. Growing stays inside the block for
    as long as the block's own lines make the text unique.
    """
    text = "".join(lines)
    upwards = True
    while True:
        search = "".join(lines[lo:hi])
        if search and len(_find_all(text, search)) == 1:
            return lo, hi
        if lo > 0 and (upwards or hi == len(lines)):
            lo -= 1
        else:
            hi += 1
        upwards = not upwards


def make_diff(a: str, b: str, language: str, *, merge_gap: int = 3) -> DiffEdit:
    """Build a diff edit that turns program ``a`` into program ``b``.

    Hunks are line-based (from :class:`difflib.SequenceMatcher`): one per run of changed lines
    inside a block, runs closer than ``merge_gap`` unchanged lines being merged. Each hunk gets
    context lines until its SEARCH text is unique in the program it will be applied to (the
    result of the hunks before it); context may reach past the block's markers, which also
    handles empty and duplicated blocks. ``apply_edit(a, make_diff(a, b, language), language)``
    always returns ``b``.

    Args:
        a: The original program.
        b: The target program; must have the same text as ``a`` outside EVOLVE-BLOCKs.
        language: ``"python"`` or ``"cpp"``.
        merge_gap: Changed runs separated by fewer unchanged lines share one hunk.

    Returns:
        The diff edit (with no hunks when the programs are equal).

    Raises:
        ProgramFormatError: If either program has malformed markers.
        PatchError: If the programs differ outside EVOLVE-BLOCKs.
        ValueError: If the language is not supported.
    """
    old, new = parse_program(a, language), parse_program(b, language)
    line = first_fixed_difference(old, new)
    if line is not None:
        raise PatchError(f"the target program changes text outside EVOLVE-BLOCKs at line {line}")
    current = split_lines(a)
    hunks: list[Hunk] = []
    shift = 0  # net lines added by the hunks of earlier blocks
    for body_a, body_b in zip(old.blocks, new.blocks, strict=True):
        la, lb = split_lines(body_a.text), split_lines(body_b.text)
        opcodes = difflib.SequenceMatcher(None, la, lb, autojunk=False).get_opcodes()
        local = 0  # net lines added by earlier hunks in this block
        for i1, i2, j1, j2 in _grouped_changes(opcodes, merge_gap):
            lo = body_a.line - 1 + shift + local + i1
            hi = lo + (i2 - i1)
            clo, chi = _unique_span(current, lo, hi)
            replacement = lb[j1:j2]
            search = "".join(current[clo:chi])
            replace = "".join(current[clo:lo] + replacement + current[hi:chi])
            hunks.append(Hunk(search, replace))
            current[lo:hi] = replacement
            local += (j2 - j1) - (i2 - i1)
        shift += local
    return DiffEdit(hunks)
