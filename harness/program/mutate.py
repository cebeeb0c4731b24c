"""Offline mutation operators for a non-LLM baseline agent.

Every operator edits text inside EVOLVE-BLOCK bodies only and returns None when it has nothing to
act on. Sites are chosen uniformly at random with the caller's ``random.Random``, so a seeded
generator gives reproducible mutations.

Generic operators work on any Python or C++ program (:func:`generic_operators`); environment
families can add task-specific alternatives with :class:`ReplaceSnippet`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .blocks import ParsedProgram, ProgramFormatError, parse_program
from .lexer import Token, TokenKind, scan

MutationFn = Callable[[str, random.Random, str], str | None]

_SWAPPED = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_INT_SUFFIX = "uUlL"
_FLOAT_SUFFIX = "fFlL"


@runtime_checkable
class Mutation(Protocol):
    """A named program transformation that only touches EVOLVE-BLOCK bodies."""

    @property
    def name(self) -> str:
        """Short identifier used in logs and operator statistics."""
        ...

    def apply(self, program: str, rng: random.Random, language: str) -> str | None:
        """Return a mutated copy of ``program``, or None if the operator does not apply."""
        ...


@dataclass(frozen=True)
class FunctionMutation:
    """A :class:`Mutation` backed by a plain function.

    Attributes:
        name: Operator name.
        fn: ``fn(program, rng, language)`` returning the mutated program or None.
    """

    name: str
    fn: MutationFn

    def apply(self, program: str, rng: random.Random, language: str) -> str | None:
        """Run the wrapped function.

        Args:
            program: Program text with EVOLVE-BLOCK markers.
            rng: Source of randomness.
            language: ``"python"`` or ``"cpp"``.

        Returns:
            The mutated program, or None if the operator does not apply.

        Raises:
            ProgramFormatError: If the program has malformed markers.
        """
        return self.fn(program, rng, language)


def _inside_blocks(parsed: ParsedProgram, start: int, end: int) -> bool:
    return any(seg.start <= start and end <= seg.end for seg in parsed.blocks)


def _block_tokens(parsed: ParsedProgram, kind: TokenKind) -> list[Token]:
    if not parsed.blocks:
        return []
    return [
        tok
        for tok in scan(parsed.text, parsed.language)
        if tok.kind == kind and _inside_blocks(parsed, tok.start, tok.end)
    ]


def _splice(parsed: ParsedProgram, start: int, end: int, new: str) -> str | None:
    """Replace ``[start, end)`` and return the program if its fixed text is unchanged, else None."""
    text = parsed.text
    result = text[:start] + new + text[end:]
    try:
        after = parse_program(result, parsed.language)
    except ProgramFormatError:
        return None
    return result if after.fixed_texts == parsed.fixed_texts else None


def _split_suffix(literal: str, suffixes: str) -> tuple[str, str]:
    core = literal.rstrip(suffixes)
    return core, literal[len(core) :]


def _perturbed_int(core: str, rng: random.Random) -> str:
    value = int(core.replace("_", "").replace("'", ""))
    options = {value + 1, value - 1, value * 2, value // 2} - {value}
    choices = sorted(v for v in options if v >= 0)
    return str(rng.choice(choices))


def _perturbed_float(core: str, rng: random.Random, sigma: float) -> str | None:
    value = float(core.replace("_", "").replace("'", ""))
    if value == 0.0 or not math.isfinite(value):
        return None
    new = value * math.exp(rng.gauss(0.0, sigma))
    if not math.isfinite(new) or new == 0.0:
        return None
    out = f"{new:.6g}"
    if not any(c in out for c in ".e"):
        out += ".0"
    return out


def _literal_replacement(literal: str, rng: random.Random, language: str, sigma: float) -> str | None:
    lowered = literal.lower()
    if lowered.startswith(("0x", "0b", "0o")) or lowered.endswith("j"):
        return None  # keep hex, binary, octal and complex literals as they are
    is_float = any(c in lowered for c in ".e") or (language == "cpp" and lowered.endswith("f"))
    if is_float:
        core, suffix = _split_suffix(literal, _FLOAT_SUFFIX if language == "cpp" else "")
        new = _perturbed_float(core, rng, sigma)
    else:
        core, suffix = _split_suffix(literal, _INT_SUFFIX if language == "cpp" else "")
        if len(core) > 1 and core.startswith("0"):
            return None  # "010" is octal in C++; leave such literals alone
        new = _perturbed_int(core, rng)
    return None if new is None else new + suffix


def perturb_numeric_literal(
    program: str, rng: random.Random, language: str, sigma: float = 0.3
) -> str | None:
    """Change one numeric literal inside an EVOLVE-BLOCK.

    Integers move by +1, -1, x2 or //2 (never below zero and never to the same value); floats are
    multiplied by ``exp(N(0, sigma))``, which keeps their sign and keeps them floats. Literals in
    identifiers, strings and comments, and hex, binary, octal and complex literals are left
    alone; C++ suffixes such as ``f`` or ``u`` are kept.

    Args:
        program: Program text with EVOLVE-BLOCK markers.
        rng: Source of randomness.
        language: ``"python"`` or ``"cpp"``.
        sigma: Standard deviation of the log of the float multiplier.

    Returns:
        The mutated program, or None if no block holds a literal that can be changed.

    Raises:
        ProgramFormatError: If the program has malformed markers.
        ValueError: If the language is not supported.
    """
    parsed = parse_program(program, language)
    candidates = _block_tokens(parsed, "number")
    rng.shuffle(candidates)
    for tok in candidates:
        new = _literal_replacement(tok.text, rng, language, sigma)
        if new is not None and new != tok.text:
            return _splice(parsed, tok.start, tok.end, new)
    return None


def swap_comparison(program: str, rng: random.Random, language: str) -> str | None:
    """Swap one comparison operator inside an EVOLVE-BLOCK: ``<`` with ``<=``, ``>`` with ``>=``.

    Args:
        program: Program text with EVOLVE-BLOCK markers.
        rng: Source of randomness.
        language: ``"python"`` or ``"cpp"``.

    Returns:
        The mutated program, or None if no block has a comparison.

    Raises:
        ProgramFormatError: If the program has malformed markers.
        ValueError: If the language is not supported.
    """
    parsed = parse_program(program, language)
    candidates = _block_tokens(parsed, "comparison")
    if not candidates:
        return None
    tok = rng.choice(candidates)
    return _splice(parsed, tok.start, tok.end, _SWAPPED[tok.text])


@dataclass(frozen=True)
class ReplaceSnippet:
    """Replace one occurrence of a snippet inside an EVOLVE-BLOCK with one of its alternatives.

    Environment families use it to offer task-specific moves, e.g. swapping one sort key for
    another. Only occurrences lying wholly inside one block body are candidates.

    Attributes:
        name: Operator name.
        search: Exact text to look for.
        replacements: Alternatives; one different from ``search`` is picked at random.
    """

    name: str
    search: str
    replacements: Sequence[str]

    def __post_init__(self) -> None:
        """Freeze the alternatives and check that the operator can do something.

        Raises:
            ValueError: If ``search`` is empty or no alternative differs from it.
        """
        object.__setattr__(self, "replacements", tuple(self.replacements))
        if not self.search:
            raise ValueError(f"ReplaceSnippet {self.name!r}: search text is empty")
        if all(r == self.search for r in self.replacements):
            raise ValueError(f"ReplaceSnippet {self.name!r}: no replacement differs from the search text")

    def apply(self, program: str, rng: random.Random, language: str) -> str | None:
        """Replace a random occurrence of ``search`` inside a block.

        Args:
            program: Program text with EVOLVE-BLOCK markers.
            rng: Source of randomness.
            language: ``"python"`` or ``"cpp"``.

        Returns:
            The mutated program, or None if the snippet does not occur inside a block (or the
            replacement would break the markers).

        Raises:
            ProgramFormatError: If the program has malformed markers.
            ValueError: If the language is not supported.
        """
        parsed = parse_program(program, language)
        sites: list[int] = []
        for seg in parsed.blocks:
            pos = seg.text.find(self.search)
            while pos != -1:
                sites.append(seg.start + pos)
                pos = seg.text.find(self.search, pos + 1)
        if not sites:
            return None
        start = rng.choice(sites)
        replacement = rng.choice([r for r in self.replacements if r != self.search])
        return _splice(parsed, start, start + len(self.search), replacement)


def generic_operators() -> list[Mutation]:
    """Return the language-agnostic operators: numeric-literal perturbation and comparison swap.

    Returns:
        Fresh operator objects named ``"perturb_numeric_literal"`` and ``"swap_comparison"``.
    """
    return [
        FunctionMutation("perturb_numeric_literal", perturb_numeric_literal),
        FunctionMutation("swap_comparison", swap_comparison),
    ]


def mutate(
    program: str, rng: random.Random, language: str, operators: Sequence[object], attempts: int = 10
) -> tuple[str, str] | None:
    """Apply a randomly chosen applicable operator.

    Operators are drawn uniformly (with replacement) until one returns a program that differs
    from the input or ``attempts`` draws have failed.

    Args:
        program: Program text with EVOLVE-BLOCK markers.
        rng: Source of randomness.
        language: ``"python"`` or ``"cpp"``.
        operators: Operators to choose from; objects without ``apply`` (operators that need a
            hypothesis text) are skipped.
        attempts: Maximum number of draws.

    Returns:
        ``(operator name, mutated program)``, or None if no draw changed the program.

    Raises:
        ProgramFormatError: If the program has malformed markers.
        ValueError: If the language is not supported.
    """
    usable = [op for op in operators if isinstance(op, Mutation)]
    if not usable:
        return None
    for _ in range(attempts):
        op = rng.choice(usable)
        result = op.apply(program, rng, language)
        if result is not None and result != program:
            return op.name, result
    return None
