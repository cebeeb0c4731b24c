"""Self-test scorer: reports what the candidate's ``probe()`` returns (numbers only)."""

from __future__ import annotations

from harness.evaluation.errors import CandidateInvalid
from harness.scoring.api import CandidateRuntime, ScoreOutcome, Scorer, require_finite


class ProbeScorer(Scorer):
    """Calls ``probe()`` once; metrics are its dict of finite numbers plus ``score`` = 1."""

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Call the probe and validate its dict.

        Raises:
            CandidateInvalid: If the probe does not return a dict of finite numbers.
        """
        res = candidate.call("probe")
        if not isinstance(res.value, dict):
            raise CandidateInvalid(f"probe() must return a dict, got {type(res.value).__name__}")
        metrics = {str(k): require_finite(f"probe()[{k!r}]", v) for k, v in res.value.items()}
        metrics["score"] = 1.0
        return ScoreOutcome(score=1.0, metrics=metrics, candidate_seconds=res.seconds)
