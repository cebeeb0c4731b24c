"""A small lexer that finds numeric literals and comparison operators in Python or C++ code.

It is not a full tokenizer: it only needs to know where identifiers, strings and comments are,
so that the mutation operators never edit a digit inside a name, a string or a comment. Input
need not be valid code; unterminated strings end at the end of their line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Literal

TokenKind = Literal["number", "comparison"]

_IDENT = re.compile(r"[^\W\d]\w*")
_COMPARISONS = ("<=", ">=", "<", ">")
# Operators that start with a comparison character but are something else.
_NOT_COMPARISONS = ("<=>", "<<=", ">>=", "<<", ">>", "->")
# Characters allowed between C++ template angle brackets (besides nested brackets).
_TEMPLATE_CHARS = re.compile(r"[\w\s:,*&.]")


@dataclass(frozen=True)
class Token:
    """A literal or operator found in the source.

    Attributes:
        kind: ``"number"`` or ``"comparison"``.
        start: Offset of the first character.
        end: Offset one past the last character.
        text: The token text.
    """

    kind: TokenKind
    start: int
    end: int
    text: str


@cache
def _number_regex(language: str) -> re.Pattern[str]:
    sep = "_" if language == "python" else "'"
    digits = rf"[0-9](?:{sep}?[0-9])*"
    suffix = "[jJ]?" if language == "python" else "[fFlLuU]*"
    return re.compile(
        rf"0[xX][0-9a-fA-F{sep}]+[lLuU]*|0[bB][01{sep}]+[lLuU]*|0[oO][0-7_]+"
        rf"|(?:{digits}(?:\.(?:{digits})?)?|\.{digits})(?:[eE][+-]?{digits})?{suffix}"
    )


def _skip_string(text: str, i: int) -> int:
    """Return the offset just past the string literal that starts with a quote at ``i``."""
    quote = text[i]
    triple = text.startswith(quote * 3, i)
    if triple:
        close = text.find(quote * 3, i + 3)
        while close != -1 and _escaped(text, close):
            close = text.find(quote * 3, close + 1)
        return len(text) if close == -1 else close + 3
    j = i + 1
    while j < len(text):
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == quote:
            return j + 1
        if ch == "\n":
            return j
        j += 1
    return len(text)


def _escaped(text: str, pos: int) -> bool:
    """True if the character at ``pos`` is preceded by an odd number of backslashes."""
    count = 0
    while pos - count - 1 >= 0 and text[pos - count - 1] == "\\":
        count += 1
    return count % 2 == 1


def _template_close(text: str, i: int) -> list[int] | None:
    """Offsets of the angle brackets of a C++ template argument list opening at ``i``, if it is one."""
    depth, brackets, j = 0, [], i
    while j < len(text) and text[j] != "\n":
        ch = text[j]
        if ch == "<":
            depth += 1
            brackets.append(j)
        elif ch == ">":
            depth -= 1
            brackets.append(j)
            if depth == 0:
                inner = text[i + 1 : j]
                return None if "&&" in inner else brackets
        elif not _TEMPLATE_CHARS.match(ch):
            return None
        j += 1
    return None


def scan(text: str, language: str) -> list[Token]:
    """Find the numeric literals and comparison operators in ``text``.

    Literals inside identifiers, strings or comments are not reported. In C++, preprocessor
    lines are skipped and angle brackets that look like template argument lists (``vector<int>``)
    are not reported as comparisons.

    Args:
        text: Python or C++ source (need not be complete).
        language: ``"python"`` or ``"cpp"``.

    Returns:
        The tokens in order of position.

    Raises:
        ValueError: If the language is not supported.
    """
    if language not in ("python", "cpp"):
        raise ValueError(f"unsupported language {language!r}; expected 'python' or 'cpp'")
    cpp = language == "cpp"
    number = _number_regex(language)
    tokens: list[Token] = []
    template_brackets: set[int] = set()
    prev_ident = False
    line_start = True
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line_start, prev_ident = True, False
            i += 1
            continue
        if ch in " \t\r\f\v":
            i += 1
            continue
        at_line_start, line_start = line_start, False
        if (ch == "#" and (not cpp or at_line_start)) or (cpp and text.startswith("//", i)):
            end = text.find("\n", i)
            i = n if end == -1 else end
            continue
        if cpp and text.startswith("/*", i):
            end = text.find("*/", i + 2)
            i = n if end == -1 else end + 2
            continue
        if ch in "\"'":
            i, prev_ident = _skip_string(text, i), False
            continue
        ident = _IDENT.match(text, i)
        if ident:
            i, prev_ident = ident.end(), True
            continue
        num = number.match(text, i) if ch.isdigit() or ch == "." else None
        if num:
            tokens.append(Token("number", i, num.end(), num.group()))
            i, prev_ident = num.end(), False
            continue
        other = next((op for op in _NOT_COMPARISONS if text.startswith(op, i)), None)
        if other:
            i, prev_ident = i + len(other), False
            continue
        comparison = next((op for op in _COMPARISONS if text.startswith(op, i)), None)
        if comparison and i not in template_brackets:
            if cpp and comparison == "<" and prev_ident:
                brackets = _template_close(text, i)
                if brackets:
                    template_brackets.update(brackets)
                    i += 1
                    continue
            tokens.append(Token("comparison", i, i + len(comparison), comparison))
            i += len(comparison)
        else:
            i += len(comparison) if comparison else 1
        prev_ident = False
    return tokens
