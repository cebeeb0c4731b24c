"""Trusted-side rules of a kernel evaluation: output comparison, stop rules, aggregate, seeds.

Everything here runs in the scorer's process on plain NumPy arrays that came back over the wire
and the scorer's own tensors, so nothing the candidate defines (tensor subclasses, patched
functions) is involved. Outputs are compared where the reference lives (:func:`compare`): on the
scorer's GPU for GPU variants, so no reference is copied to the host and no float64 pass runs there.
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


COMPARE_CHUNK = 1 << 24
"""Elements compared per step: bounds the device memory the check takes (a few float64 copies of
one chunk, ~0.5 GiB) however large the output is (TriMul's largest is 805 M elements)."""


def compare(name: str, got: Any, want: Any, rtol: float, atol: float) -> None:
    """Fail unless ``got`` matches ``want`` elementwise: ``|got - want| <= atol + rtol * |want|``.

    NaN or infinity anywhere in ``got`` fails outright (never NaN == NaN); ``got`` must be a
    tensor (a :class:`TensorOut`) of identical shape and dtype. ``want`` is the trusted side's
    own reference: a torch tensor (compared where it lives: the scorer's GPU for GPU variants, so
    no reference crosses to the host) or a :class:`TensorOut`. The arithmetic is float64 in
    separate, correctly rounded steps (no fused multiply-add), so a verdict is the same on a GPU,
    on the CPU and as NumPy's float64 check it replaced (``tests/harness/kernels``).

    Raises:
        CandidateInvalid: On any mismatch; the message names the rule and the worst element.
    """
    import torch

    if not isinstance(got, TensorOut):
        raise CandidateInvalid(f"rule 'output': {name} is not a tensor ({type(got).__name__})")
    if isinstance(want, TensorOut):
        w_all, w_dtype = torch.from_numpy(np.ascontiguousarray(want.array)), want.dtype
    else:
        w_all, w_dtype = want.detach(), str(want.dtype).replace("torch.", "")
    shape = tuple(int(x) for x in w_all.shape)
    if got.array.shape != shape:
        raise CandidateInvalid(f"rule 'shape': {name} has shape {got.array.shape}, expected {shape}")
    if got.dtype != w_dtype:
        raise CandidateInvalid(f"rule 'dtype': {name} is {got.dtype}, expected {w_dtype}")
    g_flat = torch.from_numpy(np.ascontiguousarray(got.array).reshape(-1))
    w_flat = w_all.reshape(-1)
    n = int(g_flat.numel())
    nonfinite = over_n = 0
    worst, worst_at, worst_g, worst_w = -1.0, -1, 0.0, 0.0
    with torch.no_grad():
        for s in range(0, n, COMPARE_CHUNK):
            e = min(n, s + COMPARE_CHUNK)
            g = g_flat[s:e].to(w_flat.device).to(torch.float64)
            w = w_flat[s:e].to(torch.float64)
            nonfinite += int((~torch.isfinite(g)).sum())
            if nonfinite:
                continue  # the verdict is 'finite' now: only the count matters
            err = torch.abs(g - w)
            tol = torch.abs(w).mul_(rtol).add_(atol)  # two rounded steps, as NumPy's atol + rtol * |w|
            over = err > tol
            k = int(over.sum())
            if not k:
                continue
            over_n += k
            masked = torch.where(over, err, torch.full_like(err, -1.0))
            i = int(torch.argmax(masked))  # the first of the largest, as np.argmax
            if float(masked[i]) > worst:  # strictly: an earlier chunk's tie stays the first
                worst, worst_at, worst_g, worst_w = float(masked[i]), s + i, float(g[i]), float(w[i])
    if nonfinite:
        raise CandidateInvalid(f"rule 'finite': {name} has {nonfinite} NaN or infinite values")
    if over_n:
        at = tuple(int(x) for x in np.unravel_index(worst_at, shape)) if shape else ()
        raise CandidateInvalid(
            f"rule 'mismatch': {name}: {over_n} of {n} elements off "
            f"(worst at {at}: got {worst_g:.6g}, expected {worst_w:.6g}; "
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
    max_wall_s: float = 0.0
    """Stop once the case has taken this much wall time on the scorer's clock (its warm-up, echoes
    and checks included), after ``min_repeats``: GPU MODE's 120 s per benchmark. 0: no cap."""

    def done(self, times: Sequence[float], wall_s: float = 0.0) -> bool:
        """Whether ``times`` (seconds, one per timed call) are enough, ``wall_s`` into the case."""
        n = len(times)
        if n >= self.max_repeats:
            return True
        if n < max(self.min_repeats, 1):
            return False
        if sum(times) > self.max_seconds or self.capped(wall_s):
            return True
        mean = sum(times) / n
        if n < 2 or mean <= 0:
            return False
        var = sum((t - mean) ** 2 for t in times) / (n - 1)
        return math.sqrt(var / n) / mean < self.rel_err

    def capped(self, wall_s: float) -> bool:
        """Whether a case ``wall_s`` seconds old is past the wall cap (never without one)."""
        return self.max_wall_s > 0 and wall_s > self.max_wall_s


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
