"""Compile a C++ candidate inside its sandbox and run it on many test cases in parallel.

Everything the candidate executes goes through ``CandidateRuntime.run``: a fresh sandboxed
process per command whose working directory is ``candidate.workdir``. The scorer writes
``main.cpp`` there, compiles it with ``g++`` *inside* the sandbox (g++ lives in ``/usr``, which the
sandbox binds read-only), and then runs ``./main`` once per case with the case on stdin.

Per-case classification (:func:`classify`):

* ``tle``: killed by the wall-clock limit, or by a kill signal (SIGKILL / SIGXCPU, which is how the
  kernel enforces the CPU-time rlimit), or reported CPU time above the limit.
* ``runtime_error``: any other non-zero exit (crash, abort, ``std::bad_alloc`` at the memory
  limit, a non-zero return from ``main``).
* ``invalid_output``: the run ended normally but stdout overflowed the sandbox's output cap, so
  the output was truncated and cannot be judged.
* ``ok``: the run ended normally; the family's judge then scores (or rejects) the output.

Why kill signals count as ``tle``: under bubblewrap the exit status of a signalled program is
reported as ``128 + signal`` and the resource usage of the sandboxed tree does not reach the
trusted side (``ExecResult.cpu_seconds`` only covers the bwrap launcher), so the runtime's own CPU
classification cannot fire. RLIMIT_CPU is the only source of SIGXCPU / SIGKILL inside the sandbox
apart from the wall-clock kill and the candidate itself.
"""

from __future__ import annotations

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
    """Resource limits of compiling and of running one case."""

    cpu_seconds: float = 2.0
    """CPU-time limit of one case (RLIMIT_CPU of the candidate process)."""
    wall_seconds: float = 5.0
    """Wall-clock limit of one case (generous: the CPU limit is the real one)."""
    memory_mb: int = 1024
    """Address-space limit of one case, in MiB."""
    workers: int = 1
    """Cases run at once (one per core of the variant's hardware)."""
    compile_timeout_s: float = 60.0
    """Wall-clock limit of the compiler."""
    compile_memory_mb: int = 2048
    """Address-space limit of the compiler, in MiB."""
    output_cap: int = 64 * 1024
    """Bytes of stdout the sandbox keeps (``hardware.output_kb``); longer output is truncated."""

    @classmethod
    def from_params(cls, params: Mapping[str, Any], hardware: Hardware) -> Limits:
        """Limits from scorer parameters, defaulting ``workers`` to the variant's CPU count.

        Raises:
            ValueError: If a limit is not positive.
        """
        limits = cls(
            cpu_seconds=float(params.get("cpu_seconds", 2.0)),
            wall_seconds=float(params.get("wall_seconds", 5.0)),
            memory_mb=int(params.get("memory_mb", 1024)),
            workers=int(params.get("workers", max(1, int(hardware.cpus)))),
            compile_timeout_s=float(params.get("compile_timeout_s", 60.0)),
            compile_memory_mb=int(params.get("compile_memory_mb", 2048)),
            output_cap=hardware.output_kb * 1024,
        )
        for name, value in vars(limits).items():
            if value <= 0:
                raise ValueError(f"limit {name} must be positive, got {value}")
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
    """Wall time of the run, trusted clock."""
    detail: str = ""
    """Why the case failed, for messages."""


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
    if res.returncode != 0:
        message = _tail(res.stderr or res.stdout, _COMPILE_MESSAGE_CAP).strip()
        raise CandidateError(
            f"compile error (exit {res.returncode}) from `{command}`:\n{message or '(no compiler output)'}"
        )
    if not (candidate.workdir / BINARY_NAME).is_file():
        raise CandidateError(f"`{command}` succeeded but produced no ./{BINARY_NAME}")
    return res.seconds


def classify(res: ExecResult, limits: Limits) -> tuple[str, str]:
    """Status and reason of one finished run (see the module docstring)."""
    if res.timed_out:
        which = "CPU-time" if res.limit == "cpu" else "wall-clock"
        return TLE, f"killed by the {which} limit after {res.seconds:.2f} s"
    if res.limit == "memory":  # the sandbox's cgroup OOM-killed it (a SIGKILL, not the CPU limit)
        return RUNTIME_ERROR, f"killed at the {limits.memory_mb} MiB memory limit"
    if res.returncode in _KILL_CODES:
        return TLE, f"killed by the {limits.cpu_seconds:g} s CPU-time limit (exit status {res.returncode})"
    if res.cpu_seconds == res.cpu_seconds and res.cpu_seconds > limits.cpu_seconds:  # not NaN
        return TLE, f"used {res.cpu_seconds:.2f} s of CPU time, limit {limits.cpu_seconds:g} s"
    if res.returncode != 0:
        return RUNTIME_ERROR, f"exit status {res.returncode}" + (
            f"; stderr: {_tail(res.stderr, 300).strip()}" if res.stderr.strip() else ""
        )
    if res.limit == "output" and len(res.stdout) >= limits.output_cap:
        return INVALID_OUTPUT, (
            f"rule 'output-size': stdout exceeded the {limits.output_cap // 1024} KiB cap and was truncated"
        )
    return OK, ""


def run_cases(candidate: CandidateRuntime, inputs: Sequence[bytes], limits: Limits) -> list[CaseRun]:
    """Run ``./main`` once per input, ``limits.workers`` at a time.

    Each run is a fresh sandboxed process with the CPU, memory and wall limits of one case, so a
    failure stays confined to its case.

    Returns:
        One :class:`CaseRun` per input, in input order.

    Raises:
        CandidateTimeout: The evaluation's wall budget ran out before every case had its full
            wall-clock allowance (the budget in the manifest is sized to make this rare).
    """
    out: list[CaseRun | None] = [None] * len(inputs)
    short = threading.Event()

    def one(i: int) -> None:
        if short.is_set() or candidate.remaining() < limits.wall_seconds + 0.5:
            short.set()
            return
        res = candidate.run(
            [f"./{BINARY_NAME}"],
            inputs[i],
            timeout=limits.wall_seconds,
            cpu_seconds=limits.cpu_seconds,
            memory_mb=limits.memory_mb,
        )
        status, detail = classify(res, limits)
        out[i] = CaseRun(i, status, res.stdout if status == OK else b"", res.seconds, detail)

    t0 = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=max(1, limits.workers), thread_name_prefix="ahc-case")
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
