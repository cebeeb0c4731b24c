"""The shared evaluation loop of kernel families: correctness cases, then timed benchmarks.

Ranked mode is the only mode: every call (warm-up, test or timed) gets inputs freshly generated
from a seed derived from a secret drawn per evaluation and the case's seed, and every output is
checked against the reference computed here, in the trusted process. Caching keyed on pointers,
shapes or contents therefore returns stale outputs and fails.
"""

from __future__ import annotations

import math
import secrets
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from harness.evaluation.errors import CandidateInvalid, EvaluationOutcome
from harness.evaluation.result import CaseRecord

from .batch import BatchPlan, BatchRun
from .checks import StopRule, call_seed, geomean_floored
from .session import CallTiming, CaseBound, KernelSession, OutSpec
from .timing import PROBE_REF_S


@dataclass(frozen=True)
class Case:
    """One test or benchmark case."""

    name: str
    seed: int
    spec: dict[str, Any] = field(default_factory=dict)
    """Family-specific shape parameters (validated by the family)."""


class KernelTask(Protocol):
    """What a family supplies: inputs, reference and the output check."""

    def inputs(self, case: Case, seed: int) -> Any:
        """The call's arguments for ``case``, generated from ``seed`` (trusted side)."""
        ...

    def expected(self, case: Case, args: Any) -> list[OutSpec]:
        """The output tensors' ``(dtype, shape)`` for ``args``, in output order.

        A reply declaring anything else is refused before its bytes are allocated.
        """
        ...

    def check(self, case: Case, args: Any, out: Any) -> None:
        """Compute the reference for ``args`` and compare ``out``.

        Raises:
            CandidateInvalid: The output is wrong.
        """
        ...


@dataclass
class KernelReport:
    """Outcome of one evaluation."""

    score_us: float
    """Geometric mean (floored) of the per-benchmark counted means (``CaseBound.mean``), in µs."""
    bench_means_us: dict[str, float]
    timed_calls: int
    """Timed calls over all benchmark cases (requests times their ``reps``)."""
    cpu_timing: bool
    """Whether the times are CPU times."""
    round_trip_us: float = 0.0
    """The same aggregate over the scorer's own round-trip times (transfer included): an upper
    bound the in-sandbox times cannot exceed, reported so that under-reporting stands out."""
    cases: list[CaseRecord] = field(default_factory=list)
    """Per-case verdicts: every test, then every benchmark (its score: mean microseconds per call)."""
    overhead_us: float = 0.0
    """Mean over cases of the calibrated transport floor (fastest trusted echo round trip)."""
    bound_cases: int = 0
    """Cases whose counted mean is the trusted bound (it exceeded the sandbox's mean)."""
    os_cases: int = 0
    """Cases counted by the OS-measured CPU time of the sandbox's cgroup (CPU variants)."""
    reported_us: float = 0.0
    """The same geomean over the sandbox's own reported per-call times (a hint; never counted
    where the OS figure is)."""
    os_raw_us: float = 0.0
    """The same geomean over the cases' OS figures in this machine's CPU time, before the speed
    probe's scaling (``CaseBound.os_cpu_raw``; 0 unless every case had one)."""

    def metrics(self) -> dict[str, float]:
        """Flat metrics for the result record."""
        m = {
            "score_us": self.score_us,
            "timed_calls": float(self.timed_calls),
            "round_trip_us": self.round_trip_us,
            "overhead_us": self.overhead_us,
            "bound_cases": float(self.bound_cases),
            "reported_us": self.reported_us,
            "os_raw_us": self.os_raw_us,
            # 1: every benchmark counted the OS-measured CPU time; 0: the round-trip bound over
            # the report (GPU, or no cgroup counter here: EVOBENCH_MEMORY_LIMIT=rlimit and the like).
            "timing_os_cpu": float(bool(self.bench_means_us) and self.os_cases == len(self.bench_means_us)),
        }
        m.update({f"{k}_us": v for k, v in self.bench_means_us.items()})
        return m


def quick_rules(stop: StopRule, plan: BatchPlan, calls: int) -> tuple[StopRule, BatchPlan]:
    """The stop rule and batching of a reduced-mode evaluation (``<variant>~quick``).

    Exactly ``calls`` timed requests per benchmark (after its warm-up): no precision target, no
    extra requests for batching to settle. The wall cap stays; a suspect case still gets its
    confirming calls (:meth:`KernelSession.close_case`), so the trust checks are the full mode's.

    Raises:
        ValueError: ``calls`` is below 1.
    """
    if calls < 1:
        raise ValueError(f"a reduced mode needs at least one timed call per benchmark, not {calls}")
    quick = replace(stop, min_repeats=calls, max_repeats=calls, rel_err=0.0, max_seconds=math.inf)
    return quick, replace(plan, min_requests=1, settle_requests=0)


def run_cases(
    session: KernelSession,
    task: KernelTask,
    tests: Sequence[Case],
    benchmarks: Sequence[Case],
    stop: StopRule,
    *,
    warmup: int = 1,
    floor_us: float = 1.0,
    plan: BatchPlan | None = None,
    secret: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> KernelReport:
    """Check every test case, then time every benchmark case until ``stop`` says enough.

    Benchmark requests batch ``reps`` calls on distinct inputs as ``plan`` decides (every output
    is checked); ``stop`` sees one per-call time per request.

    Raises:
        CandidateInvalid: A wrong output or a broken rule (the message names the case).
        CandidateError: The candidate raised.
        CandidateTimeout: The evaluation's budget ran out.
    """
    secret = secrets.randbits(62) if secret is None else secret
    plan = plan or BatchPlan()
    calls = 0

    trips: list[float] = []
    floors: list[float] = []
    bound = 0
    os_cases = 0
    reported: list[float] = []
    raws: list[float] = []

    def one(case: Case, ks: list[int], what: str) -> CallTiming:
        nonlocal calls
        many = [task.inputs(case, call_seed(secret, case.seed, k)) for k in ks]
        expects = [task.expected(case, args) for args in many]
        outs, timing = session.call_many(many, f"{what} {case.name}", expects, timed=what == "benchmark")
        for args, out in zip(many, outs, strict=True):
            try:
                task.check(case, args, out)
            except CandidateInvalid as e:
                raise CandidateInvalid(f"{what} {case.name}: {e}") from None
        calls += len(ks)
        trips.append(timing.round_trip / len(ks))
        return timing

    cpu = session.params.device == "cpu"
    records: list[CaseRecord] = []
    current = ""
    try:
        for case in tests:
            current = case.name
            one(case, [0], "test")
            records.append(CaseRecord(name=case.name, status="ok"))
        means: dict[str, float] = {}
        trip_means: list[float] = []
        timed = 0
        for case in benchmarks:
            current = case.name
            t_case = time.perf_counter()  # the wall cap counts the whole case (GPU MODE: 120 s)
            k = 1  # input index within the case: every call gets its own inputs
            last = 0.0
            for _ in range(warmup):
                last = one(case, [k], "warm-up").batch_time
                k += 1
            run = plan.start(last)
            times: list[float] = []
            del trips[:]

            def batch(c: Case = case, r: BatchRun = run) -> float:
                nonlocal k, timed
                t = one(c, list(range(k, k + r.reps)), "benchmark")
                k, timed = k + t.reps, timed + t.reps
                r.record(t.reps, t.batch_time)
                return t.seconds

            while run.more(stop.done(times, wall := time.perf_counter() - t_case), stop.capped(wall)):
                times.append(batch())
            mean, b = session.close_case(times, batch, f"benchmark {case.name}")
            floors.append(b.overhead_lo)
            rep_median = statistics.median(b.times or times)
            reported.append(rep_median * 1e6)
            raised = b.os_cpu is None and b.lower > rep_median
            bound += raised
            os_cases += b.os_cpu is not None
            if b.os_cpu_raw is not None:
                raws.append(b.os_cpu_raw * 1e6)
            trip_means.append(statistics.fmean(trips) * 1e6)
            means[case.name] = mean * 1e6
            records.append(_record(case.name, means[case.name], mean, b, len(times), cpu, raised))
            if progress:
                progress(f"{case.name}: {means[case.name]:.1f} us over {len(times)} calls")
    except EvaluationOutcome as e:
        failed = CaseRecord(name=current, status=e.status.value, reason=e.reason[:500])
        e.cases = [*records, failed]
        raise
    score = geomean_floored(list(means.values()), floor_us)
    trip = geomean_floored(trip_means, floor_us)
    overhead = statistics.fmean(floors) * 1e6 if floors else 0.0
    rep_score = geomean_floored(reported, floor_us) if reported else 0.0
    raw = geomean_floored(raws, floor_us) if raws and len(raws) == len(means) else 0.0
    return KernelReport(score, means, timed, cpu, trip, records, overhead, bound, os_cases, rep_score, raw)


def _record(
    name: str, us: float, mean: float, b: CaseBound, requests: int, cpu: bool, raised: bool
) -> CaseRecord:
    """A benchmark case's verdict, labelled with the clock that counted."""
    if b.os_cpu is not None:
        return CaseRecord(
            name=name,
            status="ok",
            score=us,
            cpu_seconds=mean,
            reason=f"CPU time per call in microseconds measured by the OS, at the reference speed: the "
            f"sandbox's cgroup used {b.window_cpu * 1e3:.2f} ms over {b.os_calls} calls in {requests} "
            f"requests, less the trusted echo's {b.echo_cpu * 1e3:.2f} ms for the same requests "
            f"({(b.os_cpu_raw or 0.0) * 1e6:.1f} us per call), times {PROBE_REF_S * 1e6:.0f} us / "
            f"the trusted speed probe's {b.probe * 1e6:.1f} us; the sandbox reported a median "
            f"{b.reported_median * 1e6:.1f} us",
        )
    clock = "host perf_counter (CPU run, no cgroup CPU counter here)" if cpu else "CUDA events"
    return CaseRecord(
        name=name,
        status="ok",
        score=us,
        wall_seconds=mean if cpu else None,  # CUDA time is neither
        reason=f"median over the last {b.calls} requests of {b.reps} calls of their mean per "
        f"call ({requests} requests in all) in microseconds, timed by {clock}"
        + (", raised to the trusted round-trip bound" if raised else ""),
    )
