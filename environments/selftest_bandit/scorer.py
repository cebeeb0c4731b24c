"""Trusted scorer of the bandit test instrument: the first character of ``choose()`` picks an arm.

The rule and the payoff table (:data:`PAYOFF`) are public; ``environments/selftest_bandit/README.md``
says why the instrument exists and what the eight-position variant measures.
"""

from __future__ import annotations

from harness.evaluation.errors import CandidateInvalid
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer, require_finite

ARMS = 8
"""Number of arms."""
PAYOFF: tuple[float, ...] = (0.3, 0.0, 0.5, 0.1, 0.6, 0.2, 0.4, 1.0)
"""Payoff of arms 0..7; arm 7 is the unique best."""
BEST_ARM = 7
"""The arm with the highest payoff."""
EMPTY_SCORE = 0.0
"""Score of the empty string (valid, worst)."""
MAX_CHARS = 10_000
"""Longer strings are invalid."""


def arm_of(choice: str) -> int | None:
    """The arm a string selects: ``ord`` of its first character modulo 8, None when empty."""
    return ord(choice[0]) % ARMS if choice else None


def payoff(choice: str, positions: int = 1) -> float:
    """The score of a string under the public rule.

    The mean payoff of the arms of its first ``positions`` characters, a missing character paying
    :data:`EMPTY_SCORE` (one position: the payoff of the first character's arm).

    Raises:
        ValueError: If ``positions`` < 1.
    """
    if positions < 1:
        raise ValueError("positions must be >= 1")
    total = 0.0
    for i in range(positions):
        arm = arm_of(choice[i:])
        total += EMPTY_SCORE if arm is None else PAYOFF[arm]
    return total / positions


def validate_choice(value: object) -> str:
    """Check what ``choose()`` returned and return it as a plain ``str``.

    Values arrive through the JSON wire, which decodes strings as plain ``str``; the exact type
    check still guards against a subclass whose indexing lies, should a transport ever keep one.

    Raises:
        CandidateInvalid: If the value is not exactly a ``str`` or is longer than :data:`MAX_CHARS`.
    """
    if type(value) is not str:
        raise CandidateInvalid(f"choose() must return a str, got {type(value).__name__}")
    if len(value) > MAX_CHARS:
        raise CandidateInvalid(f"choose() returned {len(value)} characters; at most {MAX_CHARS} are allowed")
    return value


class BanditScorer(Scorer):
    """Calls ``choose()`` once and pays the arms its first ``positions`` characters select."""

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Call the candidate's ``choose()`` and look its arm up in :data:`PAYOFF`.

        Raises:
            CandidateInvalid: If ``choose()`` does not return a str of at most :data:`MAX_CHARS` chars.
            CandidateError: Propagated from the runtime (the call raised or crashed).
            CandidateTimeout: Propagated from the runtime.
        """
        res = candidate.call("choose")
        choice = validate_choice(res.value)
        arm = arm_of(choice)
        positions = int(self.params.get("positions", 1))
        score = require_finite("score", payoff(choice, positions))
        metrics = {
            "score": score,
            "arm": float(-1 if arm is None else arm),
            "length": float(len(choice)),
        }
        return ScoreOutcome(score=score, metrics=metrics, candidate_seconds=res.seconds)
