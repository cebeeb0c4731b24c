"""Reading candidate output exactly as the official AHC testers (Rust) read it.

The official testers take the output as a Rust ``String`` (``read_to_string``: it must be valid
UTF-8, else "wrong answer"), cut it into tokens with ``split_whitespace`` / ``trim`` (the Unicode
``White_Space`` characters, ``char::is_whitespace``), and parse every number with
``str::parse`` (``i32`` / ``i64`` / ``usize``): an optional ``+`` (or, for signed types, ``-``)
then one or more ASCII digits; leading zeros are fine (``0007``, ``-0``, ``+1``); a value that
does not fit the type is a parse error. Each family then range-checks the value; a parse error
and an out-of-range value both make the case wrong (score 0), so a value that overflows the Rust
type is simply "out of range" here.

:func:`as_text` does the UTF-8 check and maps the non-ASCII Unicode whitespace to spaces, so that
afterwards Python's byte-level ``split`` / ``strip`` (ASCII whitespace: tab, line feed, vertical
tab, form feed, carriage return and space, the same set as Rust's on ASCII) tokenise as the
tester does. :func:`int_tokens` then parses a whole buffer of numbers in C-speed steps
(``bytes.translate``, ``split``, ``int``). Python's ``int`` alone accepts more than Rust
(``1_000``, surrounding whitespace) and gets quadratic on long digit strings, hence the byte
filter and the leading-zero stripping first.
"""

from __future__ import annotations

import numpy as np

I64_MIN = -(2**63)
I64_MAX = 2**63 - 1

_ALLOWED = b"0123456789+- \t\n\r\x0b\x0c"
_SIGNS = (b"+", b"-")
# char::is_whitespace beyond ASCII (Unicode White_Space). Python's str.split() differs (it also
# splits on U+001C..U+001F), so the set is spelled out rather than borrowed.
_UNICODE_SPACES = (
    "\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)
_TO_SPACE = {ord(c): " " for c in _UNICODE_SPACES}
_FAST_DIGITS = 18
"""Tokens up to this long (sign included) always fit in an i64."""
_CLAMP_DIGITS = 25
"""Longer magnitudes (after leading zeros) are clamped: beyond every type the testers use."""


class OutputRejected(Exception):
    """A case's output breaks a rule of the task; the case scores 0.

    Attributes:
        rule: Short rule name (``format``, ``vertex-count``, ``perimeter``, ...).
        detail: Human-readable explanation.
    """

    def __init__(self, rule: str, detail: str) -> None:
        super().__init__(f"rule '{rule}': {detail}")
        self.rule = rule
        self.detail = detail


def show(token: bytes, limit: int = 24) -> str:
    """A short, printable rendering of a (possibly binary) token for error messages."""
    text = token[:limit].decode("ascii", errors="replace")
    text = "".join(c if c.isprintable() else "?" for c in text)
    return repr(text + ("..." if len(token) > limit else ""))


def as_text(data: bytes) -> bytes:
    """The output with Rust's whitespace semantics carried over to plain ASCII whitespace.

    Args:
        data: Raw output bytes.

    Returns:
        ``data`` itself when it is ASCII; otherwise its UTF-8 re-encoding with every non-ASCII
        whitespace character replaced by a space (other non-ASCII characters are kept; they can
        never be part of a number).

    Raises:
        OutputRejected: ``utf-8`` when the bytes are not valid UTF-8 (the tester's
            "not utf-8" wrong answer).
    """
    if data.isascii():
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OutputRejected("utf-8", f"the output is not valid UTF-8 (byte {e.start})") from None
    return text.translate(_TO_SPACE).encode("utf-8")


def rust_int(token: bytes, *, unsigned: bool = False) -> int | None:
    """Value of one token as Rust's ``str::parse`` reads an integer, or None on a parse error.

    Args:
        token: One whitespace-free token.
        unsigned: Parse like an unsigned type (``usize``): no ``-`` sign, not even ``-0``.

    Returns:
        The value; magnitudes above ``10**25`` come back as ``±10**25`` (they overflow every Rust
        integer type, which the caller's range check then reports).
    """
    sign, digits = 1, token
    if token[:1] == b"+" or (token[:1] == b"-" and not unsigned):
        sign, digits = (-1 if token[:1] == b"-" else 1), token[1:]
    if not digits.isdigit():  # ASCII digits only; False for b"" (a lone sign)
        return None
    body = digits.lstrip(b"0")
    if len(body) > _CLAMP_DIGITS:
        return sign * 10**_CLAMP_DIGITS
    return sign * int(body or b"0")


def int_tokens(data: bytes) -> np.ndarray:
    """All whitespace-separated tokens of ``data`` as Rust ``i64`` values.

    Args:
        data: Raw output bytes.

    Returns:
        The integers in order, as an int64 array (empty when ``data`` holds only whitespace).

    Raises:
        OutputRejected: ``utf-8`` (see :func:`as_text`); ``format`` on a token that is not an
            integer or does not fit in a signed 64-bit integer.
    """
    data = as_text(data)
    if data.translate(None, _ALLOWED):
        i = next(k for k in range(len(data)) if data[k] not in _ALLOWED)
        token = data[i:].split(maxsplit=1)[0] if data[i:].strip() else data[i : i + 1]
        raise OutputRejected(
            "format", f"unexpected byte {data[i : i + 1]!r} in {show(token)}: not an integer"
        )
    tokens = data.split()
    if not tokens:
        return np.zeros(0, dtype=np.int64)
    if b"+" in data or b"-" in data:
        for tok in tokens:
            if not (tok.isdigit() or (tok[:1] in _SIGNS and tok[1:].isdigit())):
                raise OutputRejected("format", f"expected an integer, got {show(tok)}")
    if max(map(len, tokens)) > _FAST_DIGITS:  # rare: strip leading zeros, catch i64 overflow
        values = [rust_int(tok) for tok in tokens]
        for tok, value in zip(tokens, values, strict=True):
            if value is None or not I64_MIN <= value <= I64_MAX:
                raise OutputRejected("format", f"number {show(tok)} does not fit in a 64-bit integer")
        return np.array(values, dtype=np.int64)
    return np.fromiter(map(int, tokens), dtype=np.int64, count=len(tokens))
