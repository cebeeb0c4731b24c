"""What a kernel session measures, and from where: per-request timings, per-case figures.

Two clocks, by device (see docs/trust-model.md, kernel timing):

* CPU variants where the sandbox has a cgroup of its own: the OS-measured CPU time of the
  sandbox's process tree over a case's whole timed phase, less the CPU the trusted echo spent on
  the same requests (:attr:`CaseBound.os_cpu`). The candidate's report is never counted: it is
  shown, and one under ``suspect_ratio`` of the OS figure is flagged ``invalid``.
* GPU, or no cgroup counter here: the reported time, bounded below by the trusted round trip minus
  the fastest echo of the same request signature (:attr:`CaseBound.lower`); the echo then runs on
  a CPU the sandbox cannot use (:func:`split_cpus`).
"""

from __future__ import annotations

import math
import os
import socket
import statistics
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from harness.hardware.cpus import home_cpu

PROBE_REF_S = 250e-6
"""CPU seconds the speed probe (:func:`speed_probe`) takes on the reference machine (the 2-core
KVM machine the figures in docs/trust-model.md come from, quiet): OS figures are scaled to it."""
PROBE_QUIET_NS = 50_000
"""A probe during which the sandbox's cgroup used more CPU than this was disturbed by the
candidate: the process's fastest probe stands in for it (:meth:`KernelSession.call_many`)."""
_fastest_probe: dict[str, float] = {}


@dataclass(frozen=True)
class ProbeWork:
    """A family's own speed probe: its trusted reference on fixed inputs (CPU variants).

    The machine's slow stretches do not slow every kind of work alike (measured on MLA-tiny: its
    bf16 decode 1.6x slower, the float32 matmul probe 1.37x, in the same stretch), so a probe
    doing the counted kind of work follows the counted work best.
    """

    key: str
    """Names the workload (the fastest probe is kept per key)."""
    work: Callable[[], object] = field(compare=False, repr=False)
    """One call of the workload (a chunk of :func:`speed_probe`)."""
    ref_s: float
    """CPU seconds of one call on the reference machine, quiet (what the OS figure is scaled to)."""


def speed_probe(
    chunks: int = 5, matmuls: int = 20, cpus: tuple[int, ...] | None = None, work: ProbeWork | None = None
) -> float:
    """This thread's CPU seconds for a fixed workload: the machine's speed right now.

    On a shared VM a process's CPU time for the same work moves ~2x over seconds (other guests,
    host load); timed by the trusted scorer beside each request, the probe moves with it. The
    median of ``chunks`` chunks of ``matmuls`` 96x96 float32 matmuls on one intra-op thread (the
    first chunk warms the caches; a preempted chunk is dropped by the median). The fastest probe
    of this process is kept (:func:`fastest_probe`). ``cpus``: run on those CPUs only (this
    thread's affinity is restored after). ``work``: each chunk is one call of that workload
    instead (its own fastest probe is kept under its key).
    """
    import torch

    threads = torch.get_num_threads()
    if threads != 1:  # thread_time counts this thread only: the work must stay on it
        torch.set_num_threads(1)
    before = _pin_thread(cpus)
    try:
        a = torch.full((96, 96), 0.5)
        out = torch.empty(96, 96)
        times = []
        for _ in range(chunks):
            t0 = time.thread_time_ns()
            if work is not None:
                work.work()
            else:
                for _ in range(matmuls):
                    torch.mm(a, a, out=out)
            times.append((time.thread_time_ns() - t0) / 1e9)
    finally:
        if threads != 1:
            torch.set_num_threads(threads)
        if before is not None:
            os.sched_setaffinity(0, before)
    p = statistics.median(times)
    key = work.key if work is not None else "matmul"
    if key not in _fastest_probe or p < _fastest_probe[key]:
        _fastest_probe[key] = p
    return p


def _pin_thread(cpus: tuple[int, ...] | None) -> set[int] | None:
    """Pin the calling thread to ``cpus``; its affinity before, or None where nothing changed."""
    if not cpus:
        return None
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cpus)  # pid 0: this thread only
    except (AttributeError, OSError):
        return None
    return before


def one_cpu() -> tuple[int, ...] | None:
    """The CPU this process's OS-clocked sessions use, as a one-CPU set (None: no affinity).

    :func:`harness.hardware.cpus.home_cpu`: the worker's own CPU, else the last one.
    """
    return home_cpu()


def fastest_probe(work: ProbeWork | None = None) -> float:
    """The fastest :func:`speed_probe` of this process for ``work`` (one is made if none was)."""
    key = work.key if work is not None else "matmul"
    return _fastest_probe[key] if key in _fastest_probe else speed_probe(work=work)


@dataclass(frozen=True)
class CallTiming:
    """Times of one call: the sandbox's own figure and what the trusted side measured."""

    seconds: float
    """The sandbox's figure per call (CUDA event time on GPU, host ``perf_counter`` time on CPU,
    divided by ``reps``): a hint, averaged per case and then raised to the case's trusted bound
    (:class:`CaseBound`)."""
    host_seconds: float
    """Host time bracketing the request's calls inside the sandbox (as reported, all reps)."""
    round_trip: float
    """Trusted-side wall time of the whole request (transfer and all reps included)."""
    overhead_hi: float
    """High quantile of the calibrated echo round trips (0 for an untimed call)."""
    overhead_lo: float
    """Fastest calibrated echo round trip, the transport floor (0 for an untimed call)."""
    echo: float
    """Trusted echo round trip of the same request made right after this call, under the same
    machine load (0 for an untimed call; inf where none was needed: ``KernelSession._needs_echo``)."""
    cpu: bool
    """Whether ``seconds`` is a CPU time."""
    reps: int = 1
    """Calls in the request (distinct input sets run back to back under one clock)."""
    echo_cpu: float = 0.0
    """CPU seconds the trusted echo used for the same request (NaN: unmeasured; 0 untimed)."""
    cpu_used: float = math.nan
    """CPU seconds the sandbox's tree used between sending the request and its reply (NaN
    without a cgroup counter). Steers batching only: work deferred past the reply is counted by
    the case's window (:class:`CaseBound`), not here."""
    probe: float = math.nan
    """The trusted :func:`speed_probe` made right after this request and its echo, with the
    sandbox idle (the process's fastest probe where the sandbox used CPU during it; NaN: none)."""

    @property
    def batch_time(self) -> float:
        """What batching measures a request by.

        Its CPU where the OS counts it (load moves that far less than the round trip), else its
        round trip.
        """
        return self.cpu_used if math.isfinite(self.cpu_used) else self.round_trip

    @property
    def lower(self) -> float:
        """Per-call trusted bound ``max(0, round_trip - overhead_hi) / reps`` (0 untimed; noisy)."""
        return max(0.0, self.round_trip - self.overhead_hi) / self.reps if self.overhead_hi > 0 else 0.0


@dataclass(frozen=True)
class CaseBound:
    """The trusted lower bound of one benchmark case's per-call time."""

    lower: float
    """``max(0, fastest round trip - (1 + slack) * fastest echo - margin) / reps`` over the case's
    requests of ``reps`` calls and the echoes made right after each: both sample the same stretch
    of load and noise only adds, so the minima bound the kernel's fastest call from below,
    whatever the sandbox reports (over the case's requests of the largest size)."""
    fastest_round_trip: float
    """Fastest timed round trip of the case's requests of ``reps`` calls."""
    overhead_lo: float
    """Fastest of the echoes made right after those requests (the transport floor)."""
    reported_median: float
    """Median of the sandbox's reported per-call times in those requests."""
    calls: int
    """Timed requests of ``reps`` calls in the case."""
    reps: int = 1
    """Calls per request of the case's largest requests (the ones ``lower`` comes from)."""
    times: tuple[float, ...] = ()
    """The sandbox's per-call seconds of those requests (smaller, earlier ones are warm-up)."""
    os_cpu: float | None = None
    """CPU variants: the OS-measured time per call at the reference machine's speed,
    ``os_cpu_raw * PROBE_REF_S / probe``; None where no cgroup counter is available (then the
    round-trip bound counts)."""
    os_cpu_raw: float | None = None
    """``(cgroup CPU over the case's timed phase - the echo's CPU for the same requests) / calls``
    in this machine's CPU seconds (what the report is checked against)."""
    probe: float = PROBE_REF_S
    """Median trusted speed probe over the window's requests (:func:`speed_probe`)."""
    os_calls: int = 0
    """Kernel calls the OS figure divides by: those of the window's requests (the case's largest
    size, after the first request of that size)."""
    window_cpu: float = 0.0
    """CPU seconds the sandbox's cgroup used from the window's start (the reply to the first
    request of the case's largest size) until now."""
    echo_cpu: float = 0.0
    """CPU seconds the trusted echo used for the same requests (per request size, the median of
    its echoes times the requests of that size), subtracted from ``window_cpu``."""
    echo_at_fastest: float = math.inf
    """The trusted echo made right after the fastest request (inf: none was needed). Above the
    transport floor it shows the machine was loaded even at the case's quietest moment."""

    def load_matched(self, slack: float, margin: float) -> float | None:
        """The bound against the fastest request's own echo, where that echo shows load; else None.

        ``lower`` subtracts the quietest echo of the session: on a machine loaded all through a
        case, every round trip carries the load and the difference reads as kernel time. The echo
        made right after the fastest request carries the same load; a request still far slower
        than it did real work. A candidate can only slow that echo (never speed it), so it can only
        turn this into a smaller figure, which the caller treats as undecided, never as a pass.
        """
        quiet = (1.0 + slack) * self.overhead_lo + margin
        if not (math.isfinite(self.echo_at_fastest) and self.echo_at_fastest > quiet):
            return None
        return max(0.0, self.fastest_round_trip - (1.0 + slack) * self.echo_at_fastest - margin) / self.reps

    @property
    def clock(self) -> str:
        """What the counted figure is: ``os-cpu`` or ``round-trip`` (the bound over a report)."""
        return "os-cpu" if self.os_cpu is not None else "round-trip"

    def mean(self, times: Sequence[float]) -> tuple[float, str]:
        """The case's counted mean and which figure it is.

        With an OS figure, that figure (the report only flags: see ``KernelSession.suspect``);
        else ``max(mean(times), lower)``.

        Raises:
            ValueError: ``times`` is empty.
        """
        if self.os_cpu is not None:
            return self.os_cpu, "os-cpu"
        m = statistics.fmean(times)
        return (m, "reported") if m >= self.lower else (self.lower, "round-trip")


def peer_pid(sock: socket.socket) -> int | None:
    """The connected peer's pid in this process's PID namespace (``SO_PEERCRED``), or None."""
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return None
    pid = struct.unpack("3i", raw)[0]
    return pid if pid > 0 else None


def split_cpus() -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(echo CPUs, sandbox CPUs) where the round-trip bound counts.

    The last CPU this process may use goes to the echo, the rest to the sandbox; (None, None)
    with fewer than two.
    """
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None, None
    if len(mine) < 2:
        return None, None
    return (mine[-1],), tuple(mine[:-1])


def os_figure(
    b: CaseBound, win: Sequence[CallTiming], window: float, ref_s: float = PROBE_REF_S
) -> CaseBound:
    """``b`` with the OS figure of a case's window, or ``b`` unchanged where an echo is unmeasured.

    Args:
        b: The case's round-trip bound.
        win: The window's timed requests (the case's largest size, after the first of that size).
        window: CPU seconds the sandbox's cgroup used over the window.
        ref_s: The probe's CPU seconds on the reference machine (:class:`ProbeWork`).

    ``os_cpu_raw`` is ``window`` less the CPU the trusted echo spent on the same requests (the
    driver's transport work), per kernel call; ``os_cpu`` scales it to the reference speed by the
    trusted probes of those requests (``ref_s``: the probe's time on the reference machine).
    """
    if not win or not all(math.isfinite(c.echo_cpu) for c in win):
        return b
    # The echo's CPU per request size: the median of its pairs (one preempted, cache-cold echo
    # must not move it), times the requests of that size.
    echo = math.fsum(
        statistics.median(c.echo_cpu for c in win if c.reps == r) * sum(1 for c in win if c.reps == r)
        for r in {c.reps for c in win}
    )
    calls = sum(c.reps for c in win)
    raw = max(0.0, window - echo) / calls
    # Each probe was made right after its request; noise only slows a probe, and one the sandbox
    # disturbed counts the process's fastest. Without probes (disabled) the raw figure counts.
    probes = [c.probe for c in win if math.isfinite(c.probe)]
    probe = statistics.median(probes) if probes and len(probes) == len(win) else ref_s
    scaled = raw * ref_s / probe
    if probes and len(probes) == len(win) and all(math.isfinite(c.cpu_used) for c in win):
        scaled = _per_request_scaled(win, max(0.0, window - echo), probe) * ref_s / calls
        probe = raw * ref_s / scaled if scaled > 0 else probe
    return replace(
        b,
        os_cpu=scaled,
        os_cpu_raw=raw,
        probe=probe,
        os_calls=calls,
        window_cpu=window,
        echo_cpu=echo,
    )


def _per_request_scaled(win: Sequence[CallTiming], net: float, median_probe: float) -> float:
    """``net`` CPU seconds in probe units, each request's share at its own probe's speed.

    Times the probe's reference time, seconds at the reference speed.

    The machine's speed moves within a case (stretches of seconds on a shared VM): a request's
    net CPU (its counter less the median echo of its size) is scaled by the probe made right
    after it; what the window counted outside the requests (work deferred past a reply) by the
    median probe. Every CPU second the sandbox adds raises the figure: no way to place work
    lowers it.
    """
    sizes = {c.reps for c in win}
    echo_by_reps = {r: statistics.median(c.echo_cpu for c in win if c.reps == r) for r in sizes}
    nets = [max(0.0, c.cpu_used - echo_by_reps[c.reps]) for c in win]
    inside = math.fsum(nets)
    if inside > net:  # the per-request counters can only have seen part of the window's CPU
        nets = [x * net / inside for x in nets]
        inside = net
    return math.fsum(x / c.probe for x, c in zip(nets, win, strict=True)) + (net - inside) / median_probe
