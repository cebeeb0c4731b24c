"""The expected wall time of a GPU kernel evaluation, from a per-call model (docs/kernel-wall.md).

Every kernel call crosses the sandbox's socket as host bytes (no CUDA IPC): its inputs go in, its
outputs come back, and the trusted side then checks them on its GPU. On the GPU machines measured
(docs/gpu-check.md, TriMul's initial program) a call's wall time was a fixed part plus a part
proportional to the bytes it moved; :class:`CallModel` is that model, and
:func:`expected_wall_s` adds up an evaluation's calls under :mod:`.evaluate`'s protocol, bounded
by the stop rule's wall cap. Each GPU kernel variant writes the result beside its timeout
(``[scorer] expected_wall_s``); a test recomputes it and checks it is under ``timeout_s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .checks import StopRule


@dataclass(frozen=True)
class CallModel:
    """Wall seconds of one call on the scorer's clock: ``fixed_s + bytes * per-byte costs``.

    Defaults: the first H100 run of ``scripts/gpu-check.sh`` (docs/gpu-check.md), TriMul's
    initial program. Its fit over all calls was 0.93 s + 46.8 ns per input element; its largest
    test (805 M float32 input elements, 6.45 GB in and out, no echo) took 13.7 s for the call and
    23.8 s for the host float64 check that the check on the device replaced.
    """

    fixed_s: float = 0.93
    """Per call, whatever its size: input generation, request handling, the kernel itself at the
    smaller sizes (the H100 fit's intercept)."""
    wire_ns_per_byte: float = 1.98
    """Per byte into and out of the sandbox: device-to-host copy, socket, host-to-device copy
    ((13.7 s - 0.93 s) / 6.45 GB on the H100)."""
    check_ns_per_byte: float = 1.0
    """Per output byte, the check on the scorer's GPU: the reply's host-to-device copy and the
    chunked float64 comparison. Not measured on a GPU yet; 1 ns/B is a 1 GB/s copy, several
    times slower than any pageable copy on an H100 host, so the bound errs long."""

    def call_s(self, bytes_in: int, bytes_out: int) -> float:
        """A checked call (test, warm-up or timed) of that size, without an echo."""
        wire = (bytes_in + bytes_out) * self.wire_ns_per_byte
        return self.fixed_s + (wire + bytes_out * self.check_ns_per_byte) * 1e-9

    def echo_s(self, bytes_in: int, bytes_out: int) -> float:
        """One trusted echo of a request of that size: the same transfers, no kernel, no check."""
        return (bytes_in + bytes_out) * self.wire_ns_per_byte * 1e-9


@dataclass(frozen=True)
class CaseSize:
    """Bytes one call of a case moves."""

    name: str
    """The case's name (as in its result rows)."""
    bytes_in: int
    """Bytes of the call's input tensors."""
    bytes_out: int
    """Bytes of its output tensors."""


@dataclass(frozen=True)
class WallPlan:
    """How an evaluation spends its calls (the scorer's parameters)."""

    stop: StopRule
    """The benchmarks' stop rule (its ``max_wall_s`` caps each)."""
    warmup: int = 1
    """Untimed calls per benchmark before its timed ones."""
    calibration_echoes: int = 2
    """Echoes at a benchmark's first timed request: the first-touch one and at least one more
    (more only while they fit ``calibration_budget_s``, which the cap's term covers)."""
    start_s: float = 30.0
    """Starting the sandbox, its driver, CUDA in it and the echo (measured 7-15 s for a cold
    sandbox with CUDA on the H100 and H200; doubled)."""
    extra_requests: int = 10
    """Timed requests a case may add beyond ``stop.max_repeats`` for batching to settle."""


def benchmark_s(b: CaseSize, model: CallModel, plan: WallPlan) -> float:
    """Upper bound on one benchmark's wall time.

    Each timed request is counted with its own echo (made only where the bound needs one: the
    bound assumes it always is). With a wall cap the case ends at the first request ending past
    the cap, but never before ``min_repeats`` timed requests; without one after ``max_repeats``
    plus the batching's extra requests.
    """
    call, echo = model.call_s(b.bytes_in, b.bytes_out), model.echo_s(b.bytes_in, b.bytes_out)
    req = call + echo
    first = plan.warmup * call + plan.calibration_echoes * echo
    uncapped = first + (plan.stop.max_repeats + plan.extra_requests) * req
    if plan.stop.max_wall_s <= 0:
        return uncapped
    capped = max(plan.stop.max_wall_s, first + plan.stop.min_repeats * req) + req
    return min(uncapped, capped)


def expected_wall_s(
    tests: Sequence[CaseSize], benchmarks: Sequence[CaseSize], model: CallModel, plan: WallPlan
) -> float:
    """Upper bound on an evaluation's wall time: start, one checked call per test, the benchmarks.

    Not counted: a suspect case's confirming calls (only where a report is under half the trusted
    bound, i.e. a timing lie or a noise outlier) and compile time the candidate spends in its
    first calls beyond ``fixed_s``.
    """
    return (
        plan.start_s
        + sum(model.call_s(t.bytes_in, t.bytes_out) for t in tests)
        + sum(benchmark_s(b, model, plan) for b in benchmarks)
    )


def plan_of(params: dict[str, object]) -> WallPlan:
    """The :class:`WallPlan` a variant's ``[scorer]`` parameters give (``stop``, ``warmup``).

    Raises:
        TypeError: ``stop`` has a field :class:`StopRule` does not know.
    """
    stop = params.get("stop", {})
    return WallPlan(
        StopRule(**dict(stop)) if isinstance(stop, dict) else StopRule(),
        warmup=int(str(params.get("warmup", 1))),
    )
