"""Offline operators of the bandit test instrument (not a benchmark).

* ``set-choice`` (a :class:`~harness.llm.offline.hypothesis.HypothesisMutation`): writes the
  hypothesis text, stripped of surrounding whitespace and cut to 64 characters, into ``CHOICE``.
  The offline implementer ``offline/pacevolve`` applies it first, so the score of a PACEvolve
  iteration is the payoff of the first character of the advisor's hypothesis. It has no random
  ``apply``: random searches skip it.
* ``random-choice`` (a :class:`~harness.program.mutate.Mutation`): sets ``CHOICE`` to a random
  string of 1 to 4 printable ASCII characters, so random search explores the arms.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from harness.llm.offline.hypothesis import AssignHypothesis, Operator, set_python_assignment, string_literal

VARIABLE = "CHOICE"
"""The variable the program's ``choose()`` returns."""
HYPOTHESIS_CHARS = 64
"""The stripped hypothesis is cut to this many characters."""
_ALPHABET = string.ascii_letters + string.digits + string.punctuation + " "


@dataclass(frozen=True)
class RandomChoice:
    """Set ``CHOICE`` to a random printable string (a :class:`~harness.program.mutate.Mutation`).

    Attributes:
        name: Operator name.
        max_len: Longest string drawn.
    """

    name: str = "random-choice"
    max_len: int = 4

    def apply(self, program: str, rng: random.Random, language: str) -> str | None:
        """Draw a string of 1..``max_len`` printable ASCII characters and assign it to ``CHOICE``.

        Args:
            program: Program text with EVOLVE-BLOCK markers.
            rng: Source of randomness.
            language: Only ``python`` is supported.

        Returns:
            The edited program, or None for other languages or when ``CHOICE`` cannot be set.
        """
        if language != "python":
            return None
        text = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, self.max_len)))
        return set_python_assignment(program, VARIABLE, string_literal(text))


def operators() -> list[Operator]:
    """``set-choice`` (reads the hypothesis) and ``random-choice`` (random string)."""
    return [
        AssignHypothesis(name="set-choice", variable=VARIABLE, max_chars=HYPOTHESIS_CHARS),
        RandomChoice(),
    ]
