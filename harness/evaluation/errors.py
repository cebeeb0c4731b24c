"""Exceptions that carry an evaluation outcome from the sandbox or the scorer to the backend."""

from __future__ import annotations

from collections.abc import Sequence

from .result import CaseRecord, Status


class EvaluationOutcome(Exception):
    """Base class: an evaluation ended with a non-ok status and a reason."""

    status: Status = Status.ERROR

    def __init__(self, reason: str, cases: Sequence[CaseRecord] = ()) -> None:
        """Carry the reason and, where the scorer judged units before failing, their verdicts."""
        super().__init__(reason)
        self.reason = reason
        self.cases = list(cases)


class CandidateInvalid(EvaluationOutcome):
    """The candidate's output broke a task rule. Raised by scorers; maps to ``invalid``."""

    status = Status.INVALID


class CandidateError(EvaluationOutcome):
    """The candidate raised, crashed, failed to compile or hit a resource limit (``error``)."""

    status = Status.ERROR


class CandidateTimeout(EvaluationOutcome):
    """The candidate ran past its time limit and was killed (``timeout``)."""

    status = Status.TIMEOUT


class InfraError(EvaluationOutcome):
    """The harness failed; the candidate is not to blame (``infra_error``)."""

    status = Status.INFRA_ERROR
