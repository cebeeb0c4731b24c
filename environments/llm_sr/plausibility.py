"""Implausible generalisation in LLM-SR: test data memorised rather than a law discovered.

LLM-SR's test splits are public (the released CSVs), so a candidate can carry the test targets
inside a "deterministic equation" (a lookup table keyed on the inputs): log10 NMSE -30 where an
honest law reaches -1 to -7, with the train error unchanged. Nothing in the sandbox can stop a
candidate knowing public data, so the scorer detects the two traces such a program leaves:

* rule ``generalisation``: the test_id NMSE undercuts the train NMSE by more than
  ``max_test_gain_log10`` orders of magnitude. Train and test_id come from the same domain
  (interleaved), so an equation fitted on train does not do 10x better on test_id: on the
  family's tests, the initial programs and true laws of every variant, real and tiny, stay
  within 0.03 orders. Errors below ``floor_nmse`` (float64 round-off) compare as equal. A table
  that hits only some test rows, or is blended with the skeleton, and gains less than the limit
  (0.3 orders) is not caught.
* rule ``literals``: the canonical program (``canonical.py``: no comments, docstrings or
  formatting) carries more numeric literals, or more literal text (strings and numbers), than a
  skeleton of 10 fitted constants plausibly needs.

Whatever the encoding, the information a program carries is bounded by rule ``size``
(``canonical.py``): the scored process sees only the canonical text, capped in characters and in
compressed bytes. Thresholds are scorer parameters (``env.toml``). What is not caught: a table of
train *and* test targets within the size cap (it buys a bounded gain; see the family README).
"""

from __future__ import annotations

import io
import math
import tokenize
from dataclasses import dataclass
from typing import Any

from harness.evaluation.errors import CandidateInvalid


@dataclass(frozen=True)
class PlausibilityLimits:
    """Thresholds of the plausibility rules (scorer parameters of the same names)."""

    max_test_gain_log10: float = 0.3
    """Most orders of magnitude by which the test_id NMSE may undercut the train NMSE."""
    floor_nmse: float = 1e-16
    """NMSEs below this are clamped to it before comparing (float64 round-off, not a signal)."""
    max_numeric_literals: int = 60
    """Most number tokens in the source (``params[3]``'s 3 counts; ten parameters and their
    indices plus a dozen constants stay far below)."""
    max_text_chars: int = 3000
    """Most characters of string and number literals of the canonical program (a table fits in one
    long string or integer literal as well as in many numbers)."""
    max_source_chars: int = 262_144
    """Longest submitted program the trusted side parses at all (bounds its work: ~2 s at worst)."""
    max_canonical_chars: int = 8000
    """Most characters of the canonical program (honest programs measured: at most 1,148)."""
    max_compressed_bytes: int = 1280
    """Most bytes of the canonical program's raw LZMA2 stream: the information cap, at most
    ``8 * max_compressed_bytes + 8`` bits whatever the encoding (honest programs measured: at most
    306; the largest program the family's tests run, a sandbox probe, 1,030)."""

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> PlausibilityLimits:
        """Read the limits from scorer parameters (defaults above).

        Raises:
            ValueError: If a limit is not positive.
        """
        lim = cls(
            max_test_gain_log10=float(params.get("max_test_gain_log10", cls.max_test_gain_log10)),
            floor_nmse=float(params.get("floor_nmse", cls.floor_nmse)),
            max_numeric_literals=int(params.get("max_numeric_literals", cls.max_numeric_literals)),
            max_text_chars=int(params.get("max_text_chars", cls.max_text_chars)),
            max_source_chars=int(params.get("max_source_chars", cls.max_source_chars)),
            max_canonical_chars=int(params.get("max_canonical_chars", cls.max_canonical_chars)),
            max_compressed_bytes=int(params.get("max_compressed_bytes", cls.max_compressed_bytes)),
        )
        sizes = (lim.max_text_chars, lim.max_source_chars, lim.max_canonical_chars, lim.max_compressed_bytes)
        if min(lim.max_test_gain_log10, lim.floor_nmse, lim.max_numeric_literals, *sizes) <= 0:
            raise ValueError(f"plausibility limits must be positive: {lim}")
        return lim


@dataclass(frozen=True)
class SourceCounts:
    """What :func:`count_source` found."""

    numbers: int
    """Number tokens (integers, floats, imaginary literals)."""
    text_chars: int
    """Characters in string tokens (including prefixes and quotes), number tokens and comments
    (the scorer counts the canonical program, which has no comments)."""


_TEXT = {tokenize.STRING, tokenize.COMMENT}
_TEXT |= {getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}  # Python 3.12+ splits f-strings


def count_source(source: str) -> SourceCounts | None:
    """Count the literals of a Python source; None if it does not tokenize (it will not load)."""
    numbers = chars = 0
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type == tokenize.NUMBER:
                numbers += 1
                chars += len(tok.string)
            elif tok.type in _TEXT:
                chars += len(tok.string)
    except (tokenize.TokenError, SyntaxError, ValueError):
        return None
    return SourceCounts(numbers, chars)


def check_source(source: str, limits: PlausibilityLimits) -> None:
    """Rule ``literals``: the program is a skeleton, not a data table.

    Raises:
        CandidateInvalid: If the source holds more numbers or text than the limits allow.
    """
    counts = count_source(source)
    if counts is None:
        return
    if counts.numbers > limits.max_numeric_literals:
        raise CandidateInvalid(
            f"rule 'literals': the program holds {counts.numbers} numeric literals (limit "
            f"{limits.max_numeric_literals}); an equation skeleton gets its constants from the fit, "
            "so this looks like embedded data"
        )
    if counts.text_chars > limits.max_text_chars:
        raise CandidateInvalid(
            f"rule 'literals': the program holds {counts.text_chars} characters of literals and "
            f"comments (limit {limits.max_text_chars}), enough to embed data"
        )


def check_generalisation(train_nmse: float, test_nmse: float, limits: PlausibilityLimits) -> None:
    """Rule ``generalisation``: the test_id error does not undercut the train error implausibly.

    Raises:
        CandidateInvalid: If log10(train NMSE) - log10(test NMSE) exceeds the limit (both clamped
            at ``floor_nmse``).
    """
    floor = limits.floor_nmse
    gain = math.log10(max(train_nmse, floor)) - math.log10(max(test_nmse, floor))
    if gain > limits.max_test_gain_log10:
        raise CandidateInvalid(
            f"rule 'generalisation': test_id NMSE {test_nmse:.3g} is {gain:.1f} orders of magnitude "
            f"below the train NMSE {train_nmse:.3g} (limit {limits.max_test_gain_log10:g}); an "
            "equation fitted on train does not do that on data from the same domain, a table of "
            "the public test targets does"
        )
