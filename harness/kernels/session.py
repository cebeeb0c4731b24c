"""Trusted side of a kernel evaluation: starts the in-sandbox driver and exchanges calls with it.

The scorer creates an exchange directory in the candidate's work directory (``ExchangeDir``),
writes the candidate and the driver's parameters there, listens on a Unix socket ``s`` in it,
and starts ``harness.inside.kernel_driver`` with ``CandidateRuntime.run`` in a background thread. Each
:meth:`KernelSession.call` sends the inputs of one call (host bytes) and returns the output and
its timing. The reply must declare exactly the expected outputs' dtypes and shapes before any
byte of it is allocated (then read straight into preallocated arrays), and the time that counts
is bounded below by the trusted round trip minus a transport overhead calibrated with a trusted
echo process (``calibrate``): the in-sandbox time is a hint within that bound.
"""

from __future__ import annotations

import json
import math
import socket
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from harness.evaluation.errors import CandidateError, CandidateInvalid, CandidateTimeout
from harness.hardware.cpus import hold_home_cpu, let_go_home_cpu
from harness.inside import kernel_wire as wire
from harness.inside.kernel_driver import RULE_EXIT
from harness.sandbox.launch import module_argv
from harness.sandbox.limits.cpu import GroupCpu, group_cpu_possible, settle
from harness.scoring.api import CandidateRuntime, ExecResult
from harness.scoring.exchange import ExchangeDir

from .batch import pack
from .calibrate import Echo, EchoCalibrator, Overhead
from .checks import TensorOut
from .params import DriverParams, OutSpec
from .timing import (
    PROBE_QUIET_NS,
    PROBE_REF_S,
    CallTiming,
    CaseBound,
    fastest_probe,
    os_figure,
    peer_pid,
    speed_probe,
    split_cpus,
)
from .verdict import is_suspect, judge

_REASON_CAP = 2000


def _quota(msg: str) -> str:
    """``msg``, naming the disk quota when a write of the candidate's ran out of space (ENOSPC)."""
    if "[Errno 28]" in msg or "No space left on device" in msg:
        return f"{msg} (the candidate's disk quota, hardware.disk_mb, is full)"
    return msg


_DECODE_ERRORS = (KeyError, TypeError, ValueError, IndexError, RecursionError, MemoryError, OverflowError)


@dataclass
class KernelSession:
    """One candidate's driver process and its socket (use as a context manager)."""

    candidate: CandidateRuntime
    params: DriverParams
    prefix: str = "kernel"
    _ex: ExchangeDir | None = field(default=None, init=False)
    _echo: EchoCalibrator | None = field(default=None, init=False)
    _timed: list[CallTiming] = field(default_factory=list, init=False)
    _listener: socket.socket | None = field(default=None, init=False)
    _sock: socket.socket | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    _result: list[ExecResult | BaseException] = field(default_factory=list, init=False)
    _cpu: GroupCpu | None = field(default=None, init=False)
    _cpu0: int | None = field(default=None, init=False)
    _win_from: int = field(default=0, init=False)
    _cpu0_first: int | None = field(default=None, init=False)
    _win_first: int = field(default=0, init=False)
    _pid: int | None = field(default=None, init=False)
    _sandbox_cpus: tuple[int, ...] | None = field(default=None, init=False)
    _probe_cpus: tuple[int, ...] | None = field(default=None, init=False)
    _holds_cpu: bool = field(default=False, init=False)

    @property
    def os_clock(self) -> bool:
        """Whether this session counts OS-measured CPU time (a cgroup counter was found)."""
        return self._cpu is not None

    def __enter__(self) -> KernelSession:
        """Start the driver and wait until it has loaded the candidate.

        Raises:
            CandidateError: The driver or the candidate failed to load.
            CandidateTimeout: Loading ran past the evaluation's budget.
        """
        try:
            return self._start()
        except BaseException:
            self.close()  # the echo, the listener and the CPU lease go with a failed start
            raise

    def _start(self) -> KernelSession:
        c = self.candidate
        ex = self._ex = ExchangeDir(Path(c.workdir), self.prefix)
        ex.write_new("candidate.py", c.source.encode("utf-8"))
        ex.write_new("params.json", json.dumps(self.params.driver_json()).encode())
        # Where the round-trip bound will count (GPU, or no cgroup counter here), the echo gets a
        # CPU of its own: a candidate's processes cannot load it to inflate the transport floor.
        want_os = self.params.os_clock and self.params.device == "cpu"
        echo_cpus = None
        if want_os and group_cpu_possible():
            if self.params.pin_os:
                # The OS clock's three parts on one CPU: the sandbox's tree, the echo whose CPU is
                # subtracted, and the probe that scales it all see that CPU's speed.
                echo_cpus = self._sandbox_cpus = self._probe_cpus = hold_home_cpu()
                self._holds_cpu = echo_cpus is not None  # None: no affinity here, nothing held
        elif self.params.pin_echo:
            echo_cpus, self._sandbox_cpus = split_cpus()
        if want_os and self.params.speed_probe:
            # Before the sandbox exists: the fastest probe can never be the candidate's.
            speed_probe(cpus=self._probe_cpus, work=self.params.probe)
        # Started now so that its start-up overlaps the sandbox's; awaited at the first timed call.
        self._echo = EchoCalibrator(
            self.params.echo_json(),
            self.params.calibration_reps,
            cpus=echo_cpus,
            budget_s=self.params.calibration_budget_s,
        )
        lst = self._listener = ex.listen_unix("s")
        timeout = max(c.remaining(), 0.0)
        self._thread = threading.Thread(target=self._run, args=(ex.name, timeout), daemon=True)
        self._thread.start()
        lst.settimeout(1.0)
        while self._sock is None:
            try:
                self._sock, _ = lst.accept()
            except TimeoutError:
                if not self._thread.is_alive() or c.remaining() <= 0:
                    self._fail("starting the driver")
        lst.close()
        ex.unlink("s")  # nobody else can connect now
        if want_os:
            # The peer is the driver, before any candidate code ran: its cgroup is the sandbox's.
            self._pid = peer_pid(self._sock)
            self._cpu = GroupCpu.of_pid(self._pid) if self._pid else None
        header = self._recv_header(c.remaining() + 5.0, "loading the program")
        if header.get("type") != "ready":
            raise CandidateError(_quota(str(header.get("message", "the driver did not start"))[:_REASON_CAP]))
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the driver and release the exchange directory."""
        self.close()

    def _run(self, name: str, timeout: float) -> None:
        # ``active_seconds`` (never binding before the wall ``timeout``) gives the tree a CPU
        # counter of its own (``CaseClock``), read live by :meth:`case_bound` on CPU.
        kw: dict[str, Any] = {}
        if self.params.os_clock and self.params.device == "cpu":
            kw["active_seconds"] = timeout
        if self._sandbox_cpus:
            kw["cpus"] = self._sandbox_cpus
        try:
            argv = module_argv("harness.inside.kernel_driver", name)
            self._result.append(self.candidate.run(argv, timeout=timeout, **kw))
        except BaseException as e:  # handed to the scorer's thread by _fail
            self._result.append(e)

    def _fail(self, what: str) -> None:
        """Raise the right error for a driver that stopped answering."""
        if self._thread is not None:
            self._thread.join(timeout=30.0)
        res = self._result[0] if self._result else None
        if isinstance(res, BaseException):
            raise res
        if res is None:
            raise CandidateTimeout(f"{what}: no answer within the evaluation's budget")
        stderr = res.stderr.decode("utf-8", errors="replace").strip()
        if res.timed_out:
            raise CandidateTimeout(f"{what}: hit the {res.limit or 'wall'} limit")
        if res.returncode == RULE_EXIT:
            raise CandidateInvalid((stderr.splitlines()[-1] if stderr else "rule broken")[:_REASON_CAP])
        msg = f"{what}: driver exited with code {res.returncode}: {stderr[-_REASON_CAP:]}"
        raise CandidateError(_quota(msg))

    def _recv_header(self, timeout: float, what: str) -> dict[str, Any]:
        """The next reply's header; a non-``result`` reply may carry no arrays.

        Raises:
            CandidateError: Malformed (caps, depth, JSON, specs) or arrays where none belong.
        """
        assert self._sock is not None
        self._sock.settimeout(max(timeout, 0.1))
        try:
            header = wire.recv_header(self._sock)
            specs = wire.array_specs(header)
        except (EOFError, ConnectionError, TimeoutError):
            self._fail(what)
        except _DECODE_ERRORS as e:  # the candidate's bytes: its error, never the harness's
            raise CandidateError(
                f"{what}: malformed reply from the sandbox: {type(e).__name__}: {e}"
            ) from None
        if specs and header.get("type") != "result":
            raise CandidateError(
                f"{what}: malformed reply from the sandbox: arrays in a {header.get('type')!r}"
            )
        return header

    def _recv_arrays(self, specs: list[OutSpec], what: str) -> list[tuple[str, np.ndarray]]:
        try:
            return wire.recv_arrays(self._sock, specs)
        except (EOFError, ConnectionError, TimeoutError):
            self._fail(what)
        raise AssertionError("unreachable")

    def _send(self, header: dict[str, Any], arrays: list[tuple[str, np.ndarray]], what: str) -> None:
        assert self._sock is not None
        try:
            wire.send(self._sock, header, arrays)
        except OSError:
            self._fail(what)

    def init(self, args: Any, seed: int) -> None:
        """Construct the entry class with ``args`` under ``torch.manual_seed(seed)`` (KernelBench).

        Raises:
            CandidateError: The constructor raised.
            CandidateTimeout: The evaluation's budget ran out.
        """
        import torch

        arrays: list[tuple[str, np.ndarray]] = []
        tree = wire.encode_tree(args, torch, arrays)
        self._send({"op": "init", "args": tree, "seed": seed}, arrays, "constructing the model")
        header = self._recv_header(self.candidate.remaining() + 5.0, "constructing the model")
        if header.get("type") != "ready":
            msg = f"constructing the model: {header.get('message')}\n{header.get('traceback', '')}"
            raise CandidateError(_quota(msg[-_REASON_CAP:]))

    def call(
        self, args: Any, what: str, expect: Sequence[OutSpec], timed: bool = True
    ) -> tuple[Any, CallTiming]:
        """Run the candidate once on ``args``: :meth:`call_many` with one input set.

        Raises:
            CandidateInvalid: See :meth:`call_many`.
            CandidateError: See :meth:`call_many`.
            CandidateTimeout: See :meth:`call_many`.
        """
        outs, timing = self.call_many([args], what, [expect], timed)
        return outs[0], timing

    def call_many(
        self, calls: Sequence[Any], what: str, expects: Sequence[Sequence[OutSpec]], timed: bool = True
    ) -> tuple[list[Any], CallTiming]:
        """Run the candidate on each of ``calls`` back to back in one request, under one clock.

        Batching makes kernels shorter than the transport visible to the trusted round trip; the
        input sets must be distinct (and every output checked by the caller), so that a candidate
        returning a cached output for repeated inputs gains nothing.

        Args:
            calls: One argument tree (lists / dicts / tensors / numbers) per call.
            what: Names the request in messages.
            expects: Per call, the output tensors' dtypes and shapes in the order the output tree
                lists them: a reply declaring anything else is refused before it is read.
            timed: A benchmark request: its round trip joins the case's trusted bound (the first
                timed request of each signature calibrates the transport).

        Returns:
            The outputs (one tree per call, tensors as :class:`TensorOut`) and the timing, whose
            ``seconds`` is per call.

        Raises:
            CandidateInvalid: A rule was broken (driver-side checks, outputs other than
                ``expects``, or times the trusted round trip rules out).
            CandidateError: The candidate raised or the reply was malformed.
            CandidateTimeout: The evaluation's budget ran out.
        """
        import torch

        if not calls or len(calls) != len(expects):
            raise ValueError("one expected output list per call, and at least one call")
        expect = [(str(d), tuple(int(x) for x in s)) for e in expects for d, s in e]
        request, arrays = pack(calls, torch)
        request["expect"] = [[d, list(s)] for d, s in expect]
        oh = Overhead(0.0, 0.0, 0)
        if timed:
            assert self._echo is not None
            oh = self._echo.overhead(request, arrays)
        c0 = self._read_cpu()
        # The case's window starts after the first request of its largest size so far (that one
        # pays the new size's first touch, which the echo's calibration keeps out of its own
        # figure): from there everything the sandbox's tree uses (deferred work, forked helpers)
        # counts, until the case closes. Ramp-up requests of smaller sizes never count, so how many
        # requests a case takes does not move the per-call figure.
        bigger = timed and (not self._timed or len(calls) > max(c.reps for c in self._timed))
        if bigger:
            self._cpu0_first, self._win_first, self._cpu0 = c0, len(self._timed), None
        t0 = time.perf_counter()
        self._send(request, arrays, what)
        header = self._recv_header(self.candidate.remaining() + 5.0, what)
        kind = header.get("type")
        if kind == "rule":
            raise CandidateInvalid(str(header.get("message"))[:_REASON_CAP])
        if kind == "error":
            msg = f"{what}: {header.get('message')}\n{header.get('traceback', '')}"
            raise CandidateError(_quota(msg[-_REASON_CAP:]))
        if kind != "result":
            raise CandidateError(f"{what}: unexpected reply from the sandbox")
        specs = wire.array_specs(header)  # validated by _recv_header
        if specs != expect:
            rule = "dtype" if [s for _, s in specs] == [s for _, s in expect] else "shape"
            raise CandidateInvalid(
                f"rule '{rule}': {what}: the reply declares {specs!s:.300}, expected {expect!s:.300}"
            )
        out_arrays = self._recv_arrays(specs, what)
        round_trip = time.perf_counter() - t0
        c1 = self._read_cpu()
        req_cpu = (c1 - c0) / 1e9 if c0 is not None and c1 is not None else math.nan
        try:
            host = float(header["host"])
            event = None if header.get("event") is None else float(header["event"])
            outs = wire.decode_tree(header["out"], out_arrays, _to_numpy)
            if not isinstance(outs, list) or len(outs) != len(calls):
                raise ValueError(f"expected a list of {len(calls)} outputs")
        except _DECODE_ERRORS as e:
            raise CandidateError(
                f"{what}: malformed reply from the sandbox: {type(e).__name__}: {e}"
            ) from None
        echo = Echo(0.0, 0.0)
        if timed and self._echo is not None:
            echo = (
                self._echo.pair(request, arrays)
                if self._needs_echo(round_trip, oh)
                else Echo(math.inf, math.nan)
            )
        probe = self._probe() if timed else math.nan
        timing = self._timing(host, event, round_trip, oh, echo, len(calls))
        timing = replace(timing, cpu_used=req_cpu, probe=probe)
        if timed:
            self._timed.append(timing)
            if bigger:
                self._cpu0, self._win_from = c1, len(self._timed)
        return outs, timing

    def _needs_echo(self, round_trip: float, oh: Overhead) -> bool:
        """Whether a timed request's round trip needs an echo of its own, made right after it.

        The OS clock subtracts every request's echo CPU: always. The round-trip bound
        (:meth:`case_bound`) only where this request could make it positive, its round trip above
        ``(1 + slack)`` times the signature's fastest calibrated echo plus the margin; below that
        the kernel hides in the transport's slack (TriMul's largest GPU requests: seconds of
        transfer around milliseconds of kernel) and another echo would only double the transfer.
        Decided on the trusted clock alone: a candidate can lengthen its round trip, never shorten it.
        """
        if self._cpu is not None:
            return True
        p = self.params
        return round_trip > (1.0 + p.transport_slack) * oh.lo + p.transport_margin_s

    def _timing(
        self, host: float, event: float | None, round_trip: float, oh: Overhead, echo: Echo, reps: int
    ) -> CallTiming:
        if not (math.isfinite(host) and 0.0 <= host <= round_trip):
            raise CandidateInvalid(
                f"rule 'timing': reported host time {host:.6g} s is outside "
                f"[0, round trip {round_trip:.6g} s]"
            )
        if event is not None and not (math.isfinite(event) and 0.0 <= event <= host):
            raise CandidateInvalid(f"rule 'timing': event time {event:.6g} s exceeds host time {host:.6g} s")
        reported = host if event is None else event
        return CallTiming(
            reported / reps, host, round_trip, oh.hi, oh.lo, echo.round_trip, event is None, reps, echo.cpu
        )

    def case_bound(self) -> CaseBound:
        """The trusted bound over the current case's timed calls so far.

        Raises:
            ValueError: No timed call since the last :meth:`end_case`.
        """
        if not self._timed:
            raise ValueError("no timed call in this case")
        p = self.params
        # Each call is followed by an echo of the same request, so calls and echoes sample the same
        # stretch of machine load; noise only adds to either, so their minima compare. (The
        # smallest per-pair difference would be hostage to the one echo that waited longest.) Only
        # requests of the same size compare, and only the largest size counts: its per-call noise
        # is smallest, and a smaller size with few samples under load would overstate the kernel.
        reps = max(c.reps for c in self._timed)
        group = [c for c in self._timed if c.reps == reps]
        fastest_call = min(group, key=lambda c: c.round_trip)
        fastest = fastest_call.round_trip
        # The floor is the fastest echo of this request signature over the whole evaluation so
        # far (``overhead_lo``: calibration echoes included), not only the case's own window.
        calibrated = min((c.overhead_lo for c in group if c.overhead_lo > 0), default=math.inf)
        floor = min(min(c.echo for c in group), calibrated)
        lower = max(0.0, fastest - (1.0 + p.transport_slack) * floor - p.transport_margin_s) / reps
        rep = statistics.median(c.seconds for c in group)
        b = CaseBound(
            lower, fastest, floor, rep, len(group), reps, tuple(c.seconds for c in group),
            echo_at_fastest=fastest_call.echo,
        )  # fmt: skip
        return self._os_figure(b)

    def _probe(self) -> float:
        """The machine's speed now (:func:`speed_probe`), the sandbox idle; NaN without the OS clock.

        The candidate cannot slow it to look faster: its tree's counter is read around the probe,
        and where the tree used CPU during it the process's fastest probe stands in (no gain).
        """
        if self._cpu is None or not self.params.speed_probe:
            return math.nan
        q0 = self._cpu.read_ns()
        p = speed_probe(cpus=self._probe_cpus, work=self.params.probe)
        q1 = self._cpu.read_ns()
        if q0 is None or q1 is None or q1 - q0 > PROBE_QUIET_NS:
            return fastest_probe(self.params.probe)
        return p

    def _read_cpu(self) -> int | None:
        """The sandbox's cgroup CPU counter (ns), read once the driver idles (exact then)."""
        if self._cpu is None:
            return None
        if self._pid:
            settle(self._pid)  # a busy tree (burners) is read as is: it lags by a tick at most
        return self._cpu.read_ns()

    def _os_figure(self, b: CaseBound) -> CaseBound:
        """``b`` with the OS-measured per-call CPU time, where the cgroup counter answers.

        The sandbox's CPU over the case's window (from the reply to the first request of its
        largest size to now: work deferred between calls and forked helpers included; CPU sums over
        threads) less the CPU the trusted echo spent on the same requests (the driver's transport
        work), per kernel call of those requests.
        """
        if self._cpu is None or self._cpu0_first is None:
            return b
        start, first = self._cpu0, self._win_from
        if start is None or first >= len(self._timed):  # no request after the first of the size yet
            start, first = self._cpu0_first, self._win_first
        win = self._timed[first:]
        now = self._read_cpu()
        if now is None:
            return b
        ref_s = self.params.probe.ref_s if self.params.probe is not None else PROBE_REF_S
        return os_figure(b, win, (now - start) / 1e9, ref_s)

    def suspect(self) -> bool:
        """Whether the sandbox's figures look implausibly low against the case's trusted bound.

        The caller then makes more timed calls (:meth:`close_case`): an honest candidate's fastest
        round trip falls to its kernel time plus the transport floor as calls accrue; a candidate
        that under-reports or defers work cannot bring it lower.
        """
        return is_suspect(self.case_bound(), self.params)

    def close_case(self, times: list[float], more: Callable[[], float], what: str) -> tuple[float, CaseBound]:
        """Confirm a suspect case with more calls in spaced rounds (``confirm_pauses_s``), then close it.

        Args:
            times: The case's reported per-call seconds (extended in place).
            more: Makes one more timed call of the case and returns its reported seconds.
            what: Names the case in messages.

        Returns:
            The case's counted time (``CaseBound.mean`` of the median per-call time of the largest
            requests, each a mean over its calls) and its bound.

        Raises:
            CandidateInvalid: See :meth:`end_case`, or raised by ``more``.
            InfraError: See :meth:`end_case`.
            CandidateError: Raised by ``more``.
            CandidateTimeout: Raised by ``more``.
        """
        for pause in self.params.confirm_pauses_s:
            if not self.suspect():
                break
            # A pause never runs past the evaluation's budget (the candidate's timeout decides then).
            time.sleep(max(0.0, min(pause, self.candidate.remaining() - 1.0)))
            for _ in range(self.params.confirm_calls):
                if not self.suspect():
                    break
                times.append(more())
        bound = self.end_case(what)
        if not bound.times:
            return bound.mean(times)[0], bound
        # Each of these requests' per-call time is already a mean over ``reps`` calls; their
        # median keeps one request preempted under load from moving the case (the bound is a
        # minimum, so the reported side needs the same robustness to compare with it).
        return bound.mean([statistics.median(bound.times)])[0], bound

    def end_case(self, what: str) -> CaseBound:
        """Close one benchmark case's timed calls and return its trusted bound.

        Raises:
            CandidateInvalid: Still :meth:`suspect` (``rule 'timing'``, :func:`~.verdict.judge`).
            InfraError: Suspect only against a quiet floor the loaded machine never offered
                (:func:`~.verdict.judge`).
            ValueError: No timed call in this case.
        """
        bound = self.case_bound()
        self._timed, self._cpu0, self._cpu0_first = [], None, None
        judge(bound, self.params, what)
        return bound

    def close(self) -> None:
        """Ask the driver to stop, wait briefly, release everything (idempotent)."""
        if self._sock is not None:
            try:
                wire.send(self._sock, {"op": "stop"})
            except OSError:
                pass
            self._sock.close()
            self._sock = None
        if self._thread is not None:
            self._thread.join(timeout=10.0)
            self._thread = None
        if self._echo is not None:
            self._echo.close()
            self._echo = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._ex is not None:
            self._ex.close()
            self._ex = None
        if self._holds_cpu:
            self._holds_cpu = False
            let_go_home_cpu()


def _to_numpy(arr: np.ndarray, dtype: str) -> TensorOut:
    """A reply tensor as NumPy: bfloat16 patterns widened exactly to float32."""
    if dtype == "bfloat16":
        if arr.dtype != np.int16:
            raise ValueError("bfloat16 payload is not 16-bit")
        return TensorOut((arr.view(np.uint16).astype(np.uint32) << 16).view(np.float32), dtype)
    if str(arr.dtype) != dtype:
        raise ValueError(f"array tagged {dtype} is {arr.dtype}")
    return TensorOut(arr, dtype)
