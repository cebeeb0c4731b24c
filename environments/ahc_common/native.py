"""Compile a C++ candidate inside its sandbox and run it on many test cases in parallel.

Everything the candidate executes goes through ``CandidateRuntime.run``: a fresh sandboxed
process per command. The scorer writes ``main.cpp`` into ``candidate.workdir``, compiles it with
``g++`` *inside* the sandbox (g++ lives in ``/usr``, which the sandbox binds read-only), and then
runs ``./main`` once per case with the case on stdin, each case in a fresh, empty working
directory holding only a read-only copy of ``main`` (``run(fresh_cwd=...)``): nothing one case
writes (there, in ``/tmp`` or in ``/dev/shm``) is seen by another, as in ALE-Bench and AtCoder.
Every writable location holds at most ``hardware.disk_mb``; a case whose write failed on that
quota makes the evaluation the candidate's ``error``.

Time rules are ALE-Bench's (as TTT-Discover ran it): a case is **TLE** when its measured CPU time
exceeds ``cpu_seconds`` (2.0 s) or its elapsed time exceeds ``wall_seconds`` (2.5 s); it is only
*killed* at the generous backstops ``cpu_kill_seconds`` (3.1 s CPU) and ``wall_kill_seconds``
(4.5 s). Two deliberate differences make verdicts independent of host load: CPU time is the
case's cgroup counter (exact, the whole process tree; ALE-Bench uses GNU time), and "elapsed"
is wall time minus the time the case waited for a CPU (``/proc/<tid>/schedstat``), so a case
that merely waited behind other work is not TLE, while one that sleeps is. Each concurrently
judged case is pinned to a CPU of its own, and never more cases run at once than the worker
process has CPUs. ``wall_cap_seconds`` is an absolute wall limit for hosts so loaded that even
the waiting does not end. Without cgroups (no precise counter) the kernel's ``RLIMIT_CPU`` (whole
seconds, 4 ms ticks) is the only CPU measure: a kill signal then counts as TLE.

Per-case classification (:func:`classify`):

* ``tle``: over a time rule above (or killed by a backstop).
* ``runtime_error``: any other non-zero exit (crash, abort, ``std::bad_alloc`` at the memory
  limit, a non-zero return from ``main``); a signal death is named (``SIGSEGV``, ``SIGFPE``).
* ``invalid_output``: the run ended normally but stdout overflowed the sandbox's output cap, so
  the output was truncated and cannot be judged.
* ``ok``: the run ended normally; the family's judge then scores (or rejects) the output.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from harness.envs.manifest import Hardware
from harness.evaluation.errors import CandidateError, CandidateTimeout
from harness.scoring.api import CandidateRuntime, ExecResult
from harness.scoring.api import disk_quota_reason as quota_reason

OK = "ok"
TLE = "tle"
RUNTIME_ERROR = "runtime_error"
INVALID_OUTPUT = "invalid_output"
STATUSES = (OK, TLE, RUNTIME_ERROR, INVALID_OUTPUT)

SOURCE_NAME = "main.cpp"
BINARY_NAME = "main"
COMPILE_ARGV = ("g++", "-std=c++20", "-O2", "-o", BINARY_NAME, SOURCE_NAME)
"""The compile command (run in the sandbox's working directory)."""

_KILL_CODES = {
    -signal.SIGKILL,
    -signal.SIGXCPU,
    128 + signal.SIGKILL,
    128 + signal.SIGXCPU,
}
_COMPILE_MESSAGE_CAP = 4000


@dataclass(frozen=True)
class Limits:
    """Resource limits of compiling and of running one case (time rules: module docstring)."""

    cpu_seconds: float = 2.0
    """Time limit: a case whose measured CPU time exceeds it is TLE."""
    wall_seconds: float = 2.5
    """A case whose elapsed time (minus run-queue wait) exceeds it is TLE (ALE-Bench: TL + 0.5 s)."""
    cpu_kill_seconds: float = 3.1
    """CPU backstop at which the case is killed (ALE-Bench: ``prlimit --cpu`` = ceil(TL + 0.1) + 0.1)."""
    wall_kill_seconds: float = 4.5
    """Elapsed (minus run-queue wait) backstop at which it is killed (ALE-Bench: ceil(TL + 0.1) + 1.5)."""
    wall_cap_seconds: float = 60.0
    """Absolute wall-clock kill, whatever the load (then TLE)."""
    memory_mb: int = 1024
    """Memory limit of one case, in MiB."""
    workers: int = 1
    """Cases run at once (at most one per CPU of the worker process)."""
    compile_timeout_s: float = 60.0
    """Wall-clock limit of the compiler."""
    compile_memory_mb: int = 2048
    """Address-space limit of the compiler, in MiB."""
    output_cap: int = 64 * 1024
    """Bytes of stdout the sandbox keeps (``hardware.output_kb``); longer output is truncated."""
    disk_mb: int = 256
    """Disk quota of each writable location (``hardware.disk_mb``), for messages."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any], hardware: Hardware) -> Limits:
        """Limits from scorer parameters, defaulting ``workers`` to the variant's CPU count.

        Raises:
            ValueError: If a limit is not positive or a backstop is below its rule.
        """
        d = cls()
        limits = cls(
            **{
                k: type(getattr(d, k))(params.get(k, getattr(d, k)))
                for k in (
                    "cpu_seconds",
                    "wall_seconds",
                    "cpu_kill_seconds",
                    "wall_kill_seconds",
                    "wall_cap_seconds",
                    "memory_mb",
                    "compile_timeout_s",
                    "compile_memory_mb",
                )
            },
            workers=int(params.get("workers", max(1, int(hardware.cpus)))),
            output_cap=hardware.output_kb * 1024,
            disk_mb=hardware.disk_mb,
        )
        for name, value in vars(limits).items():
            if value <= 0:
                raise ValueError(f"limit {name} must be positive, got {value}")
        if limits.cpu_kill_seconds < limits.cpu_seconds or limits.wall_kill_seconds < limits.wall_seconds:
            raise ValueError("a kill backstop (cpu_kill_seconds, wall_kill_seconds) is below its time limit")
        return limits


@dataclass(frozen=True)
class CaseRun:
    """What one run of the compiled program on one case produced."""

    index: int
    """Position of the case in the variant's case list."""
    status: str
    """One of :data:`STATUSES` (``ok`` means: ran normally; the judge decides the rest)."""
    stdout: bytes
    """Captured stdout (empty unless ``status`` is ``ok``)."""
    seconds: float
    """Wall-clock seconds of the run, trusted clock (sandbox start-up and host load included)."""
    detail: str = ""
    """Why the case failed, for messages."""
    cpu_seconds: float = float("nan")
    """CPU seconds of the case's process tree (NaN where no cgroup measures it)."""
    wait_seconds: float = float("nan")
    """Seconds it waited for a CPU behind other work (NaN where not measured)."""


def _tail(data: bytes, limit: int) -> str:
    text = data.decode("utf-8", errors="replace")
    return text if len(text) <= limit else "..." + text[-limit:]


def compile_program(candidate: CandidateRuntime, limits: Limits) -> float:
    """Write the candidate's source as ``main.cpp`` and compile it in the sandbox.

    Returns:
        Wall seconds the compiler took.

    Raises:
        CandidateError: The compiler failed, was killed, or ran out of time; the message holds
            the compiler's output.
        CandidateTimeout: The evaluation's budget ran out before compiling could start.
    """
    if candidate.remaining() <= 1.0:
        raise CandidateTimeout("no time left in the evaluation budget to compile")
    (candidate.workdir / SOURCE_NAME).write_text(candidate.source, encoding="utf-8")
    res = candidate.run(
        list(COMPILE_ARGV), timeout=limits.compile_timeout_s, memory_mb=limits.compile_memory_mb
    )
    command = " ".join(COMPILE_ARGV)
    if res.timed_out:
        raise CandidateError(f"compilation ({command}) did not finish within {res.seconds:.0f} s")
    if res.limit == "disk":
        raise CandidateError(f"compilation ({command}): {quota_reason(limits.disk_mb)}")
    if res.returncode != 0:
        message = _tail(res.stderr or res.stdout, _COMPILE_MESSAGE_CAP).strip()
        raise CandidateError(
            f"compile error (exit {res.returncode}) from `{command}`:\n{message or '(no compiler output)'}"
        )
    if not (candidate.workdir / BINARY_NAME).is_file():
        raise CandidateError(f"`{command}` succeeded but produced no ./{BINARY_NAME}")
    return res.seconds


def signal_name(returncode: int | None) -> str:
    """``SIGSEGV``-style name of a signal death (bwrap reports ``128 + signal``), else ``""``."""
    if returncode is None:
        return ""
    sig = -returncode if returncode < 0 else (returncode - 128 if 128 < returncode < 160 else 0)
    try:
        return signal.Signals(sig).name if sig else ""
    except ValueError:
        return f"signal {sig}"


def classify(res: ExecResult, limits: Limits) -> tuple[str, str]:
    """Status and reason of one finished run (see the module docstring)."""
    cpu, measured = res.cpu_seconds, res.cpu_measured
    active = res.seconds - (res.wait_seconds if res.wait_seconds == res.wait_seconds else 0.0)
    used = f"{cpu:.3f} s CPU, " if measured else ""
    times = f"({used}{active:.2f} s elapsed less CPU wait, {res.seconds:.2f} s wall-clock)"
    if res.timed_out:
        which = {
            "cpu": f"the {limits.cpu_kill_seconds:g} s CPU-time backstop",
            "wall": f"the {limits.wall_kill_seconds:g} s elapsed-time backstop",
        }.get(res.limit, f"the {limits.wall_cap_seconds:g} s wall-clock cap")
        return TLE, f"killed by {which} {times}"
    if res.limit == "memory":  # the sandbox's cgroup OOM-killed it (a SIGKILL, not the CPU limit)
        return RUNTIME_ERROR, f"killed at the {limits.memory_mb} MiB memory limit"
    if cpu == cpu and cpu > limits.cpu_seconds:  # not NaN (unmeasured under bwrap: the launcher's)
        return TLE, f"CPU time over the {limits.cpu_seconds:g} s limit {times}"
    if res.returncode == 0 and res.limit == "output" and len(res.stdout) >= limits.output_cap:
        # Before the elapsed-time rule: an overflow is a fact of the output, while a flood's elapsed
        # time includes its writes blocked on a loaded host's disk or pipe (CI saw 0.13 s CPU and
        # 4.6 s elapsed turn a 200 MB flood into TLE). Both fail the case; this one is load-free.
        return INVALID_OUTPUT, (
            f"rule 'output-size': stdout exceeded the {limits.output_cap // 1024} KiB cap and was truncated"
        )
    if active > limits.wall_seconds:
        return TLE, f"elapsed time over the {limits.wall_seconds:g} s limit {times}"
    if not measured and res.returncode in _KILL_CODES:
        return TLE, f"killed by the CPU-time rlimit ({signal_name(res.returncode)}) {times}"
    if res.returncode != 0:
        sig = signal_name(res.returncode)
        why = f"killed by {sig}" if sig else f"exit status {res.returncode}"
        return RUNTIME_ERROR, why + (
            f"; stderr: {_tail(res.stderr, 300).strip()}" if res.stderr.strip() else ""
        )
    return OK, ""


def case_cpus(workers: int) -> list[tuple[int, ...]]:
    """One CPU per concurrently judged case, from this process's CPUs (never more cases than CPUs)."""
    try:
        mine = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return [()] * max(1, workers)
    return [(c,) for c in mine[: max(1, min(workers, len(mine)))]]


def run_cases(candidate: CandidateRuntime, inputs: Sequence[bytes], limits: Limits) -> list[CaseRun]:
    """Run ``./main`` once per input, ``limits.workers`` at a time (at most one per CPU, pinned).

    Each run is a fresh sandboxed process in a fresh working directory (see the module docstring)
    with the CPU, memory and time limits of one case, so a failure stays confined to its case.

    Returns:
        One :class:`CaseRun` per input, in input order.

    Raises:
        CandidateError: A case's write failed on the disk quota.
        CandidateTimeout: The evaluation's wall budget ran out before every case had its full
            wall-clock allowance (the budget in the manifest is sized to make this rare).
    """
    out: list[CaseRun | None] = [None] * len(inputs)
    short = threading.Event()
    slots: queue.SimpleQueue[tuple[int, ...]] = queue.SimpleQueue()
    cpus = case_cpus(limits.workers)
    for c in cpus:
        slots.put(c)

    def one(i: int) -> None:
        if short.is_set() or candidate.remaining() < limits.wall_kill_seconds + 0.5:
            short.set()
            return
        cpu_set = slots.get()
        try:
            res = candidate.run(
                [f"./{BINARY_NAME}"],
                inputs[i],
                timeout=limits.wall_cap_seconds,
                cpu_seconds=limits.cpu_kill_seconds,
                memory_mb=limits.memory_mb,
                cpus=cpu_set or None,
                active_seconds=limits.wall_kill_seconds,
                fresh_cwd=(BINARY_NAME,),
            )
        finally:
            slots.put(cpu_set)
        if res.limit == "disk":
            raise CandidateError(f"case {i}: {quota_reason(limits.disk_mb)}")
        status, detail = classify(res, limits)
        stdout = res.stdout if status == OK else b""
        cpu = res.cpu_seconds if res.cpu_measured else float("nan")
        out[i] = CaseRun(i, status, stdout, res.seconds, detail, cpu, res.wait_seconds)

    t0 = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=len(cpus), thread_name_prefix="ahc-case")
    try:
        for fut in [pool.submit(one, i) for i in range(len(inputs))]:
            fut.result()  # re-raises InfraError from the sandbox
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    done = [r for r in out if r is not None]
    if short.is_set() or len(done) != len(inputs):
        raise CandidateTimeout(
            f"the evaluation's time budget ran out after {len(done)} of {len(inputs)} cases "
            f"({time.perf_counter() - t0:.0f} s of case runs)"
        )
    return done
