"""Trusted-side rules of a kernel evaluation: output comparison, stop rules, aggregate, seeds.

Everything here runs in the scorer's process on plain NumPy arrays that came back over the wire,
so nothing the candidate defines (tensor subclasses, patched functions) is involved.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.evaluation.errors import CandidateInvalid


def cantor(a: int, b: int) -> int:
    """Cantor pairing of two non-negative integers (how upstream mixes its secret seed in)."""
    return b + (a + b) * (a + b + 1) // 2


def call_seed(secret: int, case_seed: int, call: int) -> int:
    """Seed of the ``call``-th input of a case: fresh per call, unknown without ``secret``.

    Upstream's ranked mode adds 13 per timed call; the Cantor pairing with a per-evaluation secret
    makes the schedule unpredictable to the candidate, which never sees ``secret``.
    """
    return cantor(secret, case_seed + 13 * call) % (2**63 - 1)


@dataclass(frozen=True)
class TensorOut:
    """A tensor that crossed the wire: its values (bfloat16 widened to float32) and torch dtype."""

    array: np.ndarray
    dtype: str
    """Torch dtype name without ``torch.`` (``float32``, ``bfloat16``)."""

    @classmethod
    def of(cls, tensor: Any) -> TensorOut:
        """The trusted side's own tensor in the same form as a candidate's output."""
        import torch

        dtype = str(tensor.dtype).replace("torch.", "")
        t = tensor.detach().to("cpu")
        arr = t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()
        return cls(np.array(arr, copy=True), dtype)


def compare(name: str, got: Any, want: TensorOut, rtol: float, atol: float) -> None:
    """Fail unless ``got`` matches ``want`` elementwise: ``|got - want| <= atol + rtol * |want|``.

    NaN or infinity anywhere in ``got`` fails outright (never NaN == NaN); ``got`` must be a
    tensor (a :class:`TensorOut`) of identical shape and dtype.

    Raises:
        CandidateInvalid: On any mismatch; the message names the rule and the worst element.
    """
    if not isinstance(got, TensorOut):
        raise CandidateInvalid(f"rule 'output': {name} is not a tensor ({type(got).__name__})")
    if got.array.shape != want.array.shape:
        raise CandidateInvalid(
            f"rule 'shape': {name} has shape {got.array.shape}, expected {want.array.shape}"
        )
    if got.dtype != want.dtype:
        raise CandidateInvalid(f"rule 'dtype': {name} is {got.dtype}, expected {want.dtype}")
    g = got.array.astype(np.float64)
    w = want.array.astype(np.float64)
    bad = ~np.isfinite(g)
    if bad.any():
        raise CandidateInvalid(f"rule 'finite': {name} has {int(bad.sum())} NaN or infinite values")
    err = np.abs(g - w)
    over = err > atol + rtol * np.abs(w)
    if over.any():
        i = np.unravel_index(int(np.argmax(np.where(over, err, -1.0))), g.shape)
        raise CandidateInvalid(
            f"rule 'mismatch': {name}: {int(over.sum())} of {g.size} elements off "
            f"(worst at {tuple(int(x) for x in i)}: got {g[i]:.6g}, expected {w[i]:.6g}; "
            f"rtol={rtol}, atol={atol})"
        )


@dataclass(frozen=True)
class StopRule:
    """When to stop timing one benchmark case (upstream's rule, per family)."""

    min_repeats: int = 3
    """Timed calls always made."""
    max_repeats: int = 100
    """Timed calls at most."""
    rel_err: float = 0.001
    """Stop once the standard error of the mean divided by the mean is below this."""
    max_seconds: float = 10.0
    """Stop once the measured times sum past this (candidate time, not wall)."""

    def done(self, times: Sequence[float]) -> bool:
        """Whether ``times`` (seconds, one per timed call) are enough."""
        n = len(times)
        if n >= self.max_repeats:
            return True
        if n < max(self.min_repeats, 1):
            return False
        if sum(times) > self.max_seconds:
            return True
        mean = sum(times) / n
        if n < 2 or mean <= 0:
            return False
        var = sum((t - mean) ** 2 for t in times) / (n - 1)
        return math.sqrt(var / n) / mean < self.rel_err


def geomean_floored(means: Sequence[float], floor: float) -> float:
    """Geometric mean of per-benchmark means, each raised to ``floor`` first.

    The floor stops one near-zero case from collapsing the aggregate (upstream issue #159).

    Raises:
        ValueError: If ``means`` is empty, ``floor`` is not positive, or a mean is not finite.
    """
    if not means:
        raise ValueError("no benchmark means to aggregate")
    if not floor > 0:
        raise ValueError(f"floor must be positive, got {floor}")
    logs = []
    for m in means:
        if not math.isfinite(m):
            raise ValueError(f"benchmark mean is not finite: {m}")
        logs.append(math.log(max(m, floor)))
    return math.exp(sum(logs) / len(logs))
