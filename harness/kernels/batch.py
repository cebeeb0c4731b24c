"""How many calls one timed request batches (``reps``), chosen per benchmark case.

A request's round trip carries a transport overhead of a few hundred microseconds on CPU whose
noise swamps kernels shorter than it; the trusted bound of a request of ``reps`` calls is
``(round trip - echo) / reps``, so its noise per call shrinks with ``reps``. The first guess comes
from the case's warm-up round trip, which the candidate controls; so ``reps`` also doubles after
every timed request that came back in under half the target, and a case is not closed before
that has settled. A candidate that stalls its warm-up to keep batches small therefore only
postpones them, and one that stalls its timed calls pays for it in the trusted round trip.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.inside import kernel_wire as wire


@dataclass(frozen=True)
class BatchPlan:
    """The batching policy of a variant (the ``[scorer]`` keys ``batch_target_us``, ``batch_max``)."""

    target_s: float = 0.0
    """Round trip a timed request should reach (0: no batching, one call per request)."""
    max_reps: int = 64
    """Calls per request at most (bounds the inputs held at once)."""
    settle_requests: int = 10
    """Extra timed requests a case may take, beyond its stop rule, for ``reps`` to settle."""
    min_requests: int = 5
    """Timed requests of the final size a case needs (its trusted bound is their fastest), with or
    without batching."""

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> BatchPlan:
        """The plan a manifest's ``[scorer]`` table asks for.

        Raises:
            ValueError: A negative target or fewer than one call per request.
        """
        plan = cls(
            target_s=float(params.get("batch_target_us", 0.0)) * 1e-6,
            max_reps=int(params.get("batch_max", 64)),
        )
        if plan.target_s < 0 or plan.max_reps < 1:
            raise ValueError(f"bad batching parameters: {plan}")
        return plan

    def start(self, round_trip: float) -> BatchRun:
        """The batching state of a case whose warm-up round trip took ``round_trip`` (0: none)."""
        return BatchRun(self, self.first(round_trip) if round_trip > 0 else 1, self.target_s <= 0)

    def first(self, round_trip: float) -> int:
        """``reps`` for a case whose single-call (warm-up) round trip took ``round_trip`` seconds."""
        if self.target_s <= 0:
            return 1
        return max(1, min(self.max_reps, math.ceil(self.target_s / max(round_trip, 1e-6))))

    def next(self, reps: int, round_trip: float) -> int:
        """``reps`` after a timed request of ``reps`` calls took ``round_trip`` seconds.

        A request under half the target grows to the size that would reach the target at its
        measured time per call, at least doubling. Growing straight to it (not by doublings) keeps
        a case from ending on a size first reached near its end: only the largest size's requests
        count, and a late doubling left as few as four of them under load (speedup CV 14 % against
        8 % with most of a case's requests at one size).
        """
        if self.settled(reps, round_trip):
            return reps
        to_target = math.ceil(reps * self.target_s / max(round_trip, 1e-9))
        return min(self.max_reps, max(reps * 2, to_target))

    def settled(self, reps: int, round_trip: float) -> bool:
        """Whether a request of ``reps`` calls taking ``round_trip`` is long enough (or maximal)."""
        return self.target_s <= 0 or reps >= self.max_reps or round_trip >= 0.5 * self.target_s


@dataclass
class BatchRun:
    """Batching state of one benchmark case (see :meth:`BatchPlan.start`)."""

    plan: BatchPlan
    """The policy."""
    reps: int
    """Calls in the next timed request."""
    settled: bool
    """Whether the latest request was long enough (or ``reps`` is maximal)."""
    at_reps: int = 0
    """Timed requests made so far with the current ``reps``."""
    extra: int = field(default=0)
    """Requests made beyond the stop rule so far."""

    def record(self, reps: int, round_trip: float) -> None:
        """Account for a timed request of ``reps`` calls that took ``round_trip`` seconds."""
        self.settled = self.plan.settled(reps, round_trip)
        new = self.plan.next(reps, round_trip)
        self.at_reps = self.at_reps + 1 if new == reps else 0
        self.reps = new

    def more(self, stop_done: bool, capped: bool = False) -> bool:
        """Whether to make another timed request, given whether the stop rule is satisfied.

        ``capped``: the case is past its wall cap (:meth:`StopRule.capped`); once the stop rule
        is satisfied too, no request is added for batching to settle.
        """
        if not stop_done:
            return True
        if capped:
            return False
        # Unbatched too (GPU): a case never closes on fewer than ``min_requests`` requests of its
        # final size, the group whose minima make the round-trip bound.
        enough = self.settled and self.at_reps >= self.plan.min_requests
        if enough or self.extra >= self.plan.settle_requests:
            return False
        self.extra += 1
        return True


def pack(calls: Sequence[Any], torch: Any) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
    """A call request and its arrays.

    Stacked (one tree, each array ``[reps, ...]``) when the calls differ only in their tensors'
    values: a batch then costs one transfer and one driver-side copy per input, not per call.
    """
    per: list[list[tuple[str, np.ndarray]]] = [[] for _ in calls]
    trees = [wire.encode_tree(args, torch, arrs) for args, arrs in zip(calls, per, strict=True)]
    sig = [(d, a.shape) for d, a in per[0]]
    if (
        len(calls) > 1
        and all(t == trees[0] for t in trees)
        and all([(d, a.shape) for d, a in p] == sig for p in per)
    ):
        stacked = [(d, np.stack([p[j][1] for p in per])) for j, (d, _) in enumerate(sig)]
        return {"op": "call", "stacked": True, "reps": len(calls), "args": trees[0]}, stacked
    arrays: list[tuple[str, np.ndarray]] = []  # one list: tensor indices are request-wide
    return {"op": "call", "calls": [wire.encode_tree(args, torch, arrays) for args in calls]}, arrays
