"""EVOLVE-BLOCK markers: split a candidate program into fixed text and evolvable block bodies.

A marker is a comment line of its own. In Python programs::

    # EVOLVE-BLOCK-START rebalance
    ...evolvable code...
    # EVOLVE-BLOCK-END

and in C++ programs the same with ``//`` in place of ``#``. The optional word after
``EVOLVE-BLOCK-START`` names the block. Marker lines belong to the fixed text; only the lines
strictly between a start marker and its end marker (the block *body*) may be evolved. A line that
merely mentions the marker words without being such a comment (a docstring, a string literal, code
followed by a trailing comment) is ordinary text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

MARKER_START = "EVOLVE-BLOCK-START"
MARKER_END = "EVOLVE-BLOCK-END"

_COMMENT_PREFIXES: dict[str, str] = {"python": "#", "cpp": "//"}


class ProgramFormatError(ValueError):
    """The EVOLVE-BLOCK markers of a program are malformed.

    Attributes:
        line: 1-based line number the problem was detected at.
        reason: What is wrong, without the line prefix.
    """

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


def comment_prefix(language: str) -> str:
    """Return the line-comment prefix that marker lines use in ``language``.

    Args:
        language: ``"python"`` or ``"cpp"`` (a ``Language`` enum member works too).

    Returns:
        ``"#"`` for Python, ``"//"`` for C++.

    Raises:
        ValueError: If the language is not supported.
    """
    try:
        return _COMMENT_PREFIXES[str(language)]
    except KeyError:
        known = ", ".join(repr(k) for k in _COMMENT_PREFIXES)
        raise ValueError(f"unsupported language {language!r}; expected one of {known}") from None


@cache
def _marker_regex(language: str) -> re.Pattern[str]:
    prefix = re.escape(comment_prefix(language))
    return re.compile(rf"^[ \t]*(?:{prefix})+[ \t]*EVOLVE-BLOCK-(START|END)(?:[ \t]+(.*?))?\s*$")


def split_lines(text: str) -> list[str]:
    """Split text into lines, keeping each line's newline character.

    Only a line feed ends a line (unlike ``str.splitlines``), so ``"".join(split_lines(t)) == t``
    and line numbers agree with what editors and compilers report.

    Args:
        text: Any text.

    Returns:
        The lines; the last one lacks a newline if the text does not end with one.
    """
    lines = text.split("\n")
    out = [line + "\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out


def marker_kind(line: str, language: str) -> tuple[str, str | None] | None:
    """Classify one line as a start marker, an end marker or neither.

    Args:
        line: One line of program text, with or without its newline.
        language: ``"python"`` or ``"cpp"``.

    Returns:
        ``("start", name)`` or ``("end", None)`` for marker lines (``name`` is the first word
        after the start marker, or None), otherwise None.

    Raises:
        ValueError: If the language is not supported.
    """
    match = _marker_regex(language).match(line)
    if match is None:
        return None
    if match.group(1) == "END":
        return ("end", None)
    rest = (match.group(2) or "").split()
    return ("start", rest[0] if rest else None)


@dataclass(frozen=True)
class Segment:
    """A run of program text that is either fixed or the body of one evolvable block.

    Attributes:
        text: The exact text of the segment (possibly empty for a block body).
        start: Character offset of the segment in the program.
        line: 1-based line number of the segment's first line (for an empty body, the line right
            after its start marker).
        block: Index of the block (0-based, in program order) for a body; None for fixed text.
        name: Name given on the start marker line, if any (bodies only).
    """

    text: str
    start: int
    line: int
    block: int | None = None
    name: str | None = None

    @property
    def evolvable(self) -> bool:
        """True for a block body, False for fixed text."""
        return self.block is not None

    @property
    def end(self) -> int:
        """Character offset one past the segment's last character."""
        return self.start + len(self.text)


@dataclass(frozen=True)
class ParsedProgram:
    """A program split into alternating fixed segments and block bodies.

    The segments always alternate ``fixed, body, fixed, ..., body, fixed``: a program with ``n``
    blocks has ``n + 1`` fixed segments (each non-empty when ``n > 0``, since they hold the marker
    lines) and ``n`` bodies. Concatenating all segments gives back the program text.

    Attributes:
        segments: All segments in program order.
        language: Language the markers were parsed with.
    """

    segments: tuple[Segment, ...]
    language: str

    @property
    def text(self) -> str:
        """The full program text."""
        return "".join(s.text for s in self.segments)

    @property
    def blocks(self) -> tuple[Segment, ...]:
        """The block bodies, in order."""
        return tuple(s for s in self.segments if s.evolvable)

    @property
    def fixed(self) -> tuple[Segment, ...]:
        """The fixed segments (text outside bodies, including the marker lines), in order."""
        return tuple(s for s in self.segments if not s.evolvable)

    @property
    def fixed_texts(self) -> tuple[str, ...]:
        """The texts of the fixed segments; equal tuples mean an edit kept all fixed text."""
        return tuple(s.text for s in self.fixed)

    def block(self, key: int | str) -> Segment:
        """Look up one block body by 0-based index or by name.

        Args:
            key: Block index (negative indices count from the end) or block name.

        Returns:
            The body segment.

        Raises:
            KeyError: If no block has that index or name.
        """
        blocks = self.blocks
        if isinstance(key, str):
            for seg in blocks:
                if seg.name == key:
                    return seg
            names = [s.name for s in blocks if s.name is not None]
            raise KeyError(f"no EVOLVE-BLOCK named {key!r} (named blocks: {names})")
        if isinstance(key, bool) or not -len(blocks) <= key < len(blocks):
            raise KeyError(f"no EVOLVE-BLOCK with index {key!r} (program has {len(blocks)})")
        return blocks[key]

    def block_at(self, pos: int) -> Segment | None:
        """Return the body containing character offset ``pos`` (its end offset included)."""
        for seg in self.blocks:
            if seg.start <= pos <= seg.end:
                return seg
        return None

    def with_bodies(self, bodies: Sequence[str]) -> str:
        """Return the program text with every block body replaced.

        Args:
            bodies: One new body per block, in order.

        Returns:
            The new program text; fixed segments are copied unchanged.

        Raises:
            ValueError: If the number of bodies differs from the number of blocks.
        """
        if len(bodies) != len(self.blocks):
            raise ValueError(f"expected {len(self.blocks)} block bodies, got {len(bodies)}")
        it = iter(bodies)
        return "".join(next(it) if s.evolvable else s.text for s in self.segments)


def line_at(text: str, pos: int) -> int:
    """Return the 1-based line number of character offset ``pos`` in ``text``."""
    return text.count("\n", 0, pos) + 1


def parse_program(text: str, language: str) -> ParsedProgram:
    """Split a program into fixed segments and EVOLVE-BLOCK bodies.

    Args:
        text: The program source.
        language: ``"python"`` (``#`` markers) or ``"cpp"`` (``//`` markers).

    Returns:
        The parsed program. A program without markers has zero blocks and one fixed segment.

    Raises:
        ProgramFormatError: On a start marker inside an open block, an end marker without an open
            block, a start marker that is never closed, or a block name used twice. The error
            names the offending line.
        ValueError: If the language is not supported.
    """
    segments: list[Segment] = []
    fixed_start, fixed_line = 0, 1
    open_block: tuple[int, int, str | None] | None = None  # (marker line, body offset, name)
    names: dict[str, int] = {}
    pos = 0
    for number, line in enumerate(split_lines(text), start=1):
        kind = marker_kind(line, language)
        if kind is not None and kind[0] == "start":
            if open_block is not None:
                raise ProgramFormatError(
                    number,
                    f"{MARKER_START} inside the block opened at line {open_block[0]} (blocks cannot nest)",
                )
            name = kind[1]
            if name is not None:
                if name in names:
                    raise ProgramFormatError(
                        number, f"duplicate EVOLVE-BLOCK name {name!r} (first used at line {names[name]})"
                    )
                names[name] = number
            open_block = (number, pos + len(line), name)
        elif kind is not None:
            if open_block is None:
                raise ProgramFormatError(number, f"{MARKER_END} without a matching {MARKER_START}")
            marker_line, body_start, name = open_block
            segments.append(Segment(text[fixed_start:body_start], fixed_start, fixed_line))
            segments.append(
                Segment(text[body_start:pos], body_start, marker_line + 1, len(segments) // 2, name)
            )
            fixed_start, fixed_line = pos, number
            open_block = None
        pos += len(line)
    if open_block is not None:
        raise ProgramFormatError(open_block[0], f"{MARKER_START} is never closed by {MARKER_END}")
    segments.append(Segment(text[fixed_start:], fixed_start, fixed_line))
    return ParsedProgram(tuple(segments), str(language))


def first_fixed_difference(old: ParsedProgram, new: ParsedProgram) -> int | None:
    """Locate the first line of ``new`` where its fixed text departs from ``old``'s.

    Args:
        old: The reference program.
        new: The program to check.

    Returns:
        None if both have identical fixed segments, otherwise the 1-based line number in ``new``.
    """
    old_fixed, new_fixed = old.fixed, new.fixed
    for a, b in zip(old_fixed, new_fixed, strict=False):
        if a.text != b.text:
            same = 0
            for la, lb in zip(split_lines(a.text), split_lines(b.text), strict=False):
                if la != lb:
                    break
                same += 1
            return b.line + same
    if len(old_fixed) == len(new_fixed):
        return None
    # Unreachable for well-formed programs (equal prefixes force equal counts); kept for safety.
    extra = new_fixed[len(old_fixed)] if len(new_fixed) > len(old_fixed) else new_fixed[-1]
    return extra.line
