"""Strict parsing of candidate output; every rejection is named by a rule.

Candidate output is hostile. Python's ``int`` accepts far more than a judge should (``+5``,
``1_000``, arbitrarily long digit strings that cost quadratic time), so :func:`int_tokens` first
checks the whole buffer: only ASCII digits, ``-`` and ASCII whitespace are allowed, ``-`` only as
the first character of a token with digits after it, and tokens are at most
:data:`MAX_TOKEN_LEN` characters long. The checks run in C (``bytes.translate`` / ``split``), so a
1000-vertex polygon parses in well under a millisecond.
"""

from __future__ import annotations

import numpy as np

MAX_TOKEN_LEN = 12
"""Longest accepted integer token (sign included); every legal number in these tasks is shorter."""

_ALLOWED = b"0123456789- \t\n\r\x0b\x0c"


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


def int_tokens(data: bytes) -> np.ndarray:
    """All whitespace-separated integer tokens of ``data``, as an int64 array.

    Args:
        data: Raw output bytes.

    Returns:
        The integers in order (empty when ``data`` is empty or only whitespace).

    Raises:
        OutputRejected: ``format`` on any byte or token that is not part of a plain decimal integer.
    """
    if data.translate(None, _ALLOWED):
        i = next(k for k in range(len(data)) if data[k] not in _ALLOWED)
        raise OutputRejected(
            "format", f"unexpected byte {data[i : i + 1]!r} at offset {i}; the output must be integers only"
        )
    tokens = data.split()
    if not tokens:
        return np.zeros(0, dtype=np.int64)
    if max(map(len, tokens)) > MAX_TOKEN_LEN:
        tok = next(t for t in tokens if len(t) > MAX_TOKEN_LEN)
        raise OutputRejected("format", f"number {show(tok)} is longer than {MAX_TOKEN_LEN} characters")
    if b"-" in data:
        for tok in tokens:
            if 45 in tok and not (tok[0] == 45 and tok[1:].isdigit()):
                raise OutputRejected("format", f"expected an integer, got {show(tok)}")
    return np.fromiter(map(int, tokens), dtype=np.int64, count=len(tokens))
