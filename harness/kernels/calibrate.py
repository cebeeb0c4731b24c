"""Trusted transport calibration: an echo process that answers like the driver, minus the kernel.

The scorer starts ``harness.kernels.echo`` as a plain subprocess of its own (outside the
sandbox, never the candidate's interpreter) on a Unix socket pair, the same channel kind as the driver's. For
each request signature (input arrays and expected outputs) it sends the very request the
candidate will get a few times and keeps the round trips: their high quantile is the transport
overhead ``oh_hi`` the session subtracts from a call's round trip to get a lower bound on the
call's time that the candidate cannot bend (it never touches this process). Scheduling noise on
a busy machine only ever adds to a round trip, so minima are what compare: the fastest echo is the
transport floor, and a case's fastest call minus it bounds the kernel's time from below.
"""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from harness.evaluation.errors import InfraError
from harness.inside import kernel_wire as wire
from harness.sandbox.launch import module_argv, project_root
from harness.sandbox.limits.cpu import settle, thread_cpu_ns


@dataclass(frozen=True)
class Overhead:
    """Calibrated transport overhead of one request signature (seconds)."""

    hi: float
    """High quantile of the echo round trips: a per-call bound ``round_trip - hi`` (reported)."""
    lo: float
    """Fastest echo round trip: the transport floor subtracted from a case's fastest call."""
    samples: int
    """Echo round trips measured."""


@dataclass(frozen=True)
class Echo:
    """One echo of a request, made right after the real call."""

    round_trip: float
    """Trusted wall time of the echo's round trip (seconds)."""
    cpu: float
    """CPU seconds the echo process used for it (all its threads; NaN where unmeasurable): the
    driver's own per-request work, measured the way the sandbox's cgroup counter measures."""


class EchoCalibrator:
    """One trusted echo process and the overheads measured with it (use as a context manager)."""

    def __init__(
        self,
        params: dict[str, Any],
        reps: int = 7,
        quantile: float = 0.8,
        cpus: tuple[int, ...] | None = None,
        budget_s: float = math.inf,
    ) -> None:
        """Start the echo process (its answers are awaited lazily, at the first calibration).

        Args:
            params: The driver parameters (device, threads, mutable), as the candidate's driver gets.
            reps: Echo round trips per request signature.
            quantile: Which order statistic of them counts as ``Overhead.hi``.
            cpus: Pin the echo to these CPUs (ones the sandbox cannot use), or None.
            budget_s: A signature's calibration stops once its echoes took this long (at least one
                echo after the first-touch one): TriMul's largest GPU request takes seconds to echo,
                and seven of them per benchmark cost more than its timed calls.

        Raises:
            InfraError: The process could not be started.
        """
        self.reps, self.quantile, self.budget_s = max(1, reps), quantile, budget_s
        self._cache: dict[str, list[float]] = {}
        self._latest: dict[str, float] = {}
        self._ready = False
        self.cuda_index: int | None = None
        """The CUDA device the echo reported computing on (None on CPU or before it answered)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock = mine
        self._tmp = tempfile.TemporaryDirectory(prefix="kernel-echo-")
        argv = module_argv(
            "harness.kernels.echo",
            str(theirs.fileno()),
            json.dumps(params),
            python=sys.executable,
            root=str(project_root()),
        )
        try:
            self.proc = subprocess.Popen(
                argv,
                pass_fds=(theirs.fileno(),),
                cwd=self._tmp.name,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            )
        except OSError as e:
            mine.close()
            raise InfraError(f"starting the timing echo process: {e}") from e
        finally:
            theirs.close()

    @staticmethod
    def _key(header: dict[str, Any], arrays: list[tuple[str, np.ndarray]]) -> str:
        return json.dumps([[d, list(a.shape)] for d, a in arrays] + [header.get("expect"), header.get("op")])

    def __enter__(self) -> EchoCalibrator:
        """Return self."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the process."""
        self.close()

    def _exchange(
        self, header: dict[str, Any], arrays: list[tuple[str, np.ndarray]], timeout: float
    ) -> float:
        self.sock.settimeout(timeout)
        t0 = time.perf_counter()
        wire.send(self.sock, header, arrays)
        reply, _ = wire.recv(self.sock)
        took = time.perf_counter() - t0
        if reply.get("type") != "result":
            raise InfraError(f"timing echo answered {str(reply)[:300]}")
        return took

    def overhead(
        self, header: dict[str, Any], arrays: list[tuple[str, np.ndarray]], more: int = 0
    ) -> Overhead:
        """The overhead of requests like this one (``reps`` echoes at its signature's first use).

        Args:
            header: The request header exactly as the driver gets it (``expect`` included).
            arrays: Its arrays.
            more: Further echoes to add to this signature's samples now (the minimum can only
                fall towards the true transport floor).

        Raises:
            InfraError: The echo process failed (a harness fault: the candidate never reaches it).
        """
        key = self._key(header, arrays)
        trips = self._cache.setdefault(key, [])
        todo = more + (0 if trips else self.reps)
        try:
            if not self._ready:
                self.sock.settimeout(120.0)
                ready, _ = wire.recv(self.sock, max_payload=0)
                if ready.get("type") != "ready":
                    raise InfraError(f"timing echo did not start: {str(ready)[:300]}")
                self._ready = True
                self.cuda_index = ready.get("cuda_index")
            if not trips:
                self._exchange(header, arrays, 60.0)  # first touch of this size: allocator, page faults
            spent = 0.0
            for i in range(todo):
                if i and not more and spent >= self.budget_s:
                    break  # calibration over budget: the floor only rises (a weaker, never unjust, bound)
                trips.append(self._exchange(header, arrays, 60.0))
                spent += trips[-1]
                self._latest[key] = trips[-1]
        except (OSError, EOFError, ValueError) as e:
            err = self._stderr()
            raise InfraError(f"timing echo failed: {type(e).__name__}: {e} {err}") from e
        trips.sort()
        hi = trips[min(len(trips) - 1, round(self.quantile * (len(trips) - 1)))]
        return Overhead(hi, trips[0], len(trips))

    def pair(self, header: dict[str, Any], arrays: list[tuple[str, np.ndarray]]) -> Echo:
        """One more echo of this request: its round trip and the CPU the echo used for it.

        Made right after the real call, so that both see the same machine load.

        Raises:
            InfraError: The echo process failed.
        """
        settle(self.proc.pid)  # idle in recv: its counters are exact
        c0 = thread_cpu_ns(self.proc.pid)
        self.overhead(header, arrays, more=1)
        settle(self.proc.pid)  # back in recv after sending the reply
        c1 = thread_cpu_ns(self.proc.pid)
        cpu = (c1 - c0) / 1e9 if c0 is not None and c1 is not None else math.nan
        return Echo(self._latest[self._key(header, arrays)], cpu)

    def _stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return self.proc.stderr.read().decode("utf-8", "replace")[-1000:]

    def close(self) -> None:
        """Ask the echo to stop and reap it (idempotent)."""
        if self.sock.fileno() >= 0:
            try:
                self.sock.settimeout(1.0)
                wire.send(self.sock, {"op": "stop"})
            except OSError:
                pass
            self.sock.close()
        try:
            self.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        self._tmp.cleanup()
