"""Edit types for candidate programs and the SEARCH/REPLACE text format LLMs write diffs in.

A diff is one or more hunks of this form (AlphaEvolve / OpenEvolve style)::

    <<<<<<< SEARCH
    old lines
    =======
    new lines
    >>>>>>> REPLACE

:func:`parse_diff` reads them out of a model response, ignoring prose and code fences around
them; :func:`render_diff` writes them. Every line between the markers is kept with its newline,
so parsed SEARCH texts always end with a newline and REPLACE texts are empty or end with one.
The types are re-exported by :mod:`harness.program.patch`, which applies them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SEARCH = re.compile(r"^\s*<{7}\s*SEARCH\s*$")
_DIVIDER = re.compile(r"^\s*={7}\s*$")
_REPLACE = re.compile(r"^\s*>{7}\s*REPLACE\s*$")


class PatchError(ValueError):
    """An edit could not be parsed, rendered or applied.

    Attributes:
        reason: What went wrong, without the hunk prefix.
        hunk: 1-based number of the failing hunk for diff edits, else None.
    """

    def __init__(self, reason: str, hunk: int | None = None) -> None:
        super().__init__(reason if hunk is None else f"hunk {hunk}: {reason}")
        self.reason = reason
        self.hunk = hunk


@dataclass(frozen=True)
class FullRewrite:
    """Replace the whole program; text outside EVOLVE-BLOCKs must stay identical.

    Attributes:
        text: The new program.
    """

    text: str


@dataclass(frozen=True)
class BlockRewrite:
    """Replace the body of one EVOLVE-BLOCK.

    Attributes:
        block: 0-based block index or the block's name.
        body: The new body; a newline is appended if it is non-empty and lacks one.
    """

    block: int | str
    body: str


@dataclass(frozen=True)
class Hunk:
    """One SEARCH/REPLACE pair.

    Attributes:
        search: Text that must occur exactly once in the program.
        replace: Text that takes its place.
    """

    search: str
    replace: str


@dataclass(frozen=True)
class DiffEdit:
    """A sequence of hunks, applied in order (each to the result of the previous ones).

    Attributes:
        hunks: The hunks; an empty list is the identity edit.
    """

    hunks: list[Hunk] = field(default_factory=list)


Edit = FullRewrite | BlockRewrite | DiffEdit


def parse_diff(text: str) -> DiffEdit:
    """Read SEARCH/REPLACE hunks out of free text such as an LLM response.

    Lines outside hunks (prose, code fences, blank lines) are ignored. Inside a hunk every line
    is content except the ``=======`` divider and the closing ``>>>>>>> REPLACE``.

    Args:
        text: Text containing zero or more hunks.

    Returns:
        The hunks in order of appearance (none if the text has no hunk).

    Raises:
        PatchError: For a malformed hunk, naming its 1-based number and the problem: a missing
            divider or closing marker, a second divider, a new ``<<<<<<< SEARCH`` before the
            current hunk is closed, an empty SEARCH section, or ``>>>>>>> REPLACE`` without an
            opening ``<<<<<<< SEARCH``.
    """
    hunks: list[Hunk] = []
    state = "prose"  # or "search" / "replace"
    search: list[str] = []
    replace: list[str] = []
    opened_at = 0
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for number, raw in enumerate(lines, start=1):
        line = raw + "\n"
        hunk = len(hunks) + 1
        if _SEARCH.match(raw):
            if state != "prose":
                missing = "=======" if state == "search" else ">>>>>>> REPLACE"
                raise PatchError(
                    f"missing {missing} before the next <<<<<<< SEARCH at line {number} "
                    f"(hunk opened at line {opened_at})",
                    hunk,
                )
            state, search, replace, opened_at = "search", [], [], number
        elif state == "search" and _DIVIDER.match(raw):
            if not search:
                raise PatchError(f"SEARCH section is empty (hunk opened at line {opened_at})", hunk)
            state = "replace"
        elif state == "replace" and _DIVIDER.match(raw):
            raise PatchError(
                f"second ======= divider at line {number} (hunk opened at line {opened_at})", hunk
            )
        elif _REPLACE.match(raw):
            if state == "prose":
                raise PatchError(f">>>>>>> REPLACE at line {number} without an opening <<<<<<< SEARCH", hunk)
            if state == "search":
                raise PatchError(
                    f"missing ======= divider before >>>>>>> REPLACE at line {number} "
                    f"(hunk opened at line {opened_at})",
                    hunk,
                )
            hunks.append(Hunk("".join(search), "".join(replace)))
            state = "prose"
        elif state == "search":
            search.append(line)
        elif state == "replace":
            replace.append(line)
    if state != "prose":
        missing = "=======" if state == "search" else ">>>>>>> REPLACE"
        raise PatchError(
            f"missing {missing}: the text ends inside the hunk opened at line {opened_at}", len(hunks) + 1
        )
    return DiffEdit(hunks)


def _check_renderable(text: str, section: str, number: int, allow_empty: bool) -> None:
    if not text and not allow_empty:
        raise PatchError(f"cannot render: {section} text is empty", number)
    if text and not text.endswith("\n"):
        raise PatchError(f"cannot render: {section} text does not end with a newline", number)
    for line in text.split("\n"):
        if _SEARCH.match(line) or _DIVIDER.match(line) or _REPLACE.match(line):
            raise PatchError(f"cannot render: {section} text contains the diff marker line {line!r}", number)


def render_diff(edit: DiffEdit) -> str:
    """Write a diff edit in the SEARCH/REPLACE format, so that ``parse_diff`` reads it back.

    Args:
        edit: The diff to render.

    Returns:
        The hunks separated by blank lines (an empty string for an empty diff).

    Raises:
        PatchError: If a hunk cannot be written faithfully: an empty SEARCH text, a SEARCH or
            non-empty REPLACE text that does not end with a newline, or a line that looks like
            a diff marker. The error names the hunk.
    """
    parts = []
    for number, hunk in enumerate(edit.hunks, start=1):
        _check_renderable(hunk.search, "SEARCH", number, allow_empty=False)
        _check_renderable(hunk.replace, "REPLACE", number, allow_empty=True)
        parts.append(f"<<<<<<< SEARCH\n{hunk.search}=======\n{hunk.replace}>>>>>>> REPLACE\n")
    return "\n".join(parts)
