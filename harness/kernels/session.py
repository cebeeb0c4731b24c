"""Trusted side of a kernel evaluation: starts the in-sandbox driver and exchanges calls with it.

The scorer creates an exchange directory in the candidate's work directory (``ExchangeDir``),
writes the candidate, the driver and its parameters there, listens on a Unix socket ``s`` in it,
and starts ``kernel_driver.py`` with ``CandidateRuntime.run`` in a background thread. Each
:meth:`KernelSession.call` sends the inputs of one call and returns the output (decoded with
``allow_pickle=False``, sizes capped) and the times, checked against the trusted round trip.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.evaluation.errors import CandidateError, CandidateInvalid, CandidateTimeout
from harness.scoring.api import CandidateRuntime, ExecResult
from harness.scoring.exchange import ExchangeDir

from . import driver as wire
from .checks import TensorOut

DRIVER_FILE = Path(__file__).with_name("driver.py")
_REASON_CAP = 2000


@dataclass(frozen=True)
class DriverParams:
    """What the in-sandbox driver needs (written to ``params.json``)."""

    entry: str
    """Candidate function called with the inputs (e.g. ``custom_kernel``)."""
    device: str
    """``cuda`` or ``cpu``."""
    l2_flush_bytes: int = 0
    """Bytes written before every timed call to flush the L2 (0: none; CUDA only)."""
    mutable: tuple[int, ...] = ()
    """Indices (in input order) of input tensors the call may update in place (a KV cache)."""
    threads: int = 1
    """Torch intra-op threads."""
    ipc: bool = True
    """On CUDA, send inputs as CUDA IPC handles of transport copies instead of host arrays."""


@dataclass(frozen=True)
class CallTiming:
    """Times of one call."""

    seconds: float
    """The time that counts: CUDA event time on GPU, host ``perf_counter`` time on CPU."""
    host_seconds: float
    """Host time bracketing the call inside the sandbox."""
    round_trip: float
    """Trusted-side wall time of the whole request (transfer included)."""
    cpu: bool
    """Whether ``seconds`` is a CPU time."""


@dataclass
class KernelSession:
    """One candidate's driver process and its socket (use as a context manager)."""

    candidate: CandidateRuntime
    params: DriverParams
    prefix: str = "kernel"
    max_output_bytes: int = 1 << 30
    _ex: ExchangeDir | None = field(default=None, init=False)
    _listener: socket.socket | None = field(default=None, init=False)
    _sock: socket.socket | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    _result: list[ExecResult | BaseException] = field(default_factory=list, init=False)

    def __enter__(self) -> KernelSession:
        """Start the driver and wait until it has loaded the candidate.

        Raises:
            CandidateError: The driver or the candidate failed to load.
            CandidateTimeout: Loading ran past the evaluation's budget.
        """
        c = self.candidate
        ex = self._ex = ExchangeDir(Path(c.workdir), self.prefix)
        ex.write_new("candidate.py", c.source.encode("utf-8"))
        ex.write_new("kernel_driver.py", DRIVER_FILE.read_bytes())
        p = {
            "entry": self.params.entry,
            "device": self.params.device,
            "l2_flush_bytes": self.params.l2_flush_bytes,
            "mutable": list(self.params.mutable),
            "threads": self.params.threads,
        }
        ex.write_new("params.json", json.dumps(p).encode())
        path = Path(c.workdir) / ex.name / "s"
        lst = self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        lst.bind(str(path))
        os.chmod(path, 0o777)  # the sandbox runs as another uid
        lst.listen(1)
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
        os.unlink(path)  # nobody else can connect now
        header, _ = self._recv(c.remaining() + 5.0, "loading the program")
        if header.get("type") != "ready":
            raise CandidateError(str(header.get("message", "the driver did not start"))[:_REASON_CAP])
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the driver and release the exchange directory."""
        self.close()

    def _run(self, name: str, timeout: float) -> None:
        try:
            self._result.append(
                self.candidate.run(["{python}", "-I", "-B", f"{name}/kernel_driver.py"], timeout=timeout)
            )
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
        if res.returncode == wire.RULE_EXIT:
            raise CandidateInvalid((stderr.splitlines()[-1] if stderr else "rule broken")[:_REASON_CAP])
        raise CandidateError(f"{what}: driver exited with code {res.returncode}: {stderr[-_REASON_CAP:]}")

    def _recv(self, timeout: float, what: str) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        assert self._sock is not None
        self._sock.settimeout(max(timeout, 0.1))
        try:
            return wire.recv(self._sock, max_payload=self.max_output_bytes)
        except (EOFError, ConnectionError, TimeoutError):
            self._fail(what)
        except ValueError as e:  # malformed or oversized reply (JSON, npz, caps)
            raise CandidateError(f"{what}: malformed reply from the sandbox: {e}") from None
        raise AssertionError("unreachable")

    def init(self, args: Any, seed: int) -> None:
        """Construct the entry class with ``args`` under ``torch.manual_seed(seed)`` (KernelBench).

        Raises:
            CandidateError: The constructor raised.
            CandidateTimeout: The evaluation's budget ran out.
        """
        import torch

        assert self._sock is not None
        arrays: dict[str, np.ndarray] = {}
        tree = wire.encode_tree(args, torch, arrays)
        try:
            wire.send(self._sock, {"op": "init", "args": tree, "seed": seed}, arrays)
        except OSError:
            self._fail("constructing the model")
        header, _ = self._recv(self.candidate.remaining() + 5.0, "constructing the model")
        if header.get("type") != "ready":
            msg = f"constructing the model: {header.get('message')}\n{header.get('traceback', '')}"
            raise CandidateError(msg[-_REASON_CAP:])

    def call(self, args: Any, what: str) -> tuple[Any, CallTiming]:
        """Run the candidate on ``args`` (lists / dicts / tensors / numbers).

        Returns:
            The output tree with tensors as :class:`TensorOut`, and the timing.

        Raises:
            CandidateInvalid: A rule was broken (driver-side checks, or event/host times above the
                trusted round trip).
            CandidateError: The candidate raised or the reply was malformed.
            CandidateTimeout: The evaluation's budget ran out.
        """
        import torch

        assert self._sock is not None
        arrays: dict[str, np.ndarray] = {}
        shared = _IpcTransport(torch) if self.params.ipc and self.params.device == "cuda" else None
        tree = wire.encode_tree(args, torch, arrays, shared.handle if shared else None)
        t0 = time.perf_counter()
        try:
            wire.send(self._sock, {"op": "call", "args": tree}, arrays)
        except OSError:
            self._fail(what)
        header, out_arrays = self._recv(self.candidate.remaining() + 5.0, what)
        round_trip = time.perf_counter() - t0
        if shared is not None:
            shared.release()  # the driver has copied them before running the candidate
        kind = header.get("type")
        if kind == "rule":
            raise CandidateInvalid(str(header.get("message"))[:_REASON_CAP])
        if kind == "error":
            msg = f"{what}: {header.get('message')}\n{header.get('traceback', '')}"
            raise CandidateError(msg[-_REASON_CAP:])
        if kind != "result":
            raise CandidateError(f"{what}: unexpected reply from the sandbox")
        try:
            host = float(header["host"])
            event = None if header.get("event") is None else float(header["event"])
            out = wire.decode_tree(header["out"], out_arrays, _to_numpy)
        except (KeyError, TypeError, ValueError) as e:
            raise CandidateError(f"{what}: malformed reply from the sandbox: {e}") from None
        if not 0.0 <= host <= round_trip:
            raise CandidateInvalid(
                f"rule 'timing': reported host time {host:.6g} s is outside [0, "
                f"round trip {round_trip:.6g} s]"
            )
        if event is not None and not 0.0 <= event <= host:
            raise CandidateInvalid(f"rule 'timing': event time {event:.6g} s exceeds host time {host:.6g} s")
        seconds = host if event is None else event
        return out, CallTiming(seconds, host, round_trip, event is None)

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
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._ex is not None:
            self._ex.close()
            self._ex = None


def _to_numpy(arr: np.ndarray, dtype: str) -> TensorOut:
    """A reply tensor as NumPy: bfloat16 patterns widened exactly to float32."""
    if dtype == "bfloat16":
        if arr.dtype != np.int16:
            raise ValueError("bfloat16 payload is not 16-bit")
        return TensorOut((arr.view(np.uint16).astype(np.uint32) << 16).view(np.float32), dtype)
    if str(arr.dtype) != dtype:
        raise ValueError(f"array tagged {dtype} is {arr.dtype}")
    return TensorOut(arr, dtype)


class _IpcTransport:
    """Transport copies of one call's CUDA inputs, shared with the driver by CUDA IPC handle.

    Written against the documented ``torch.multiprocessing`` CUDA sharing (pickled with its
    ``ForkingPickler`` reductions; the producer keeps the tensor alive until the consumer is done)
    and ``torch.cuda.MemPool`` / ``torch.cuda.use_mem_pool``: the copies live in their own pool,
    so an IPC handle (which maps a whole allocator segment) exposes nothing but these inputs, never
    a reference output or the checker's own tensors. The scorer keeps its originals untouched.
    Untested here (no GPU); covered by ``gpu``-marked tests.
    """

    def __init__(self, torch: Any) -> None:
        from multiprocessing.reduction import ForkingPickler

        import torch.multiprocessing  # noqa: F401 - registers the CUDA tensor reductions

        self.torch, self._dumps = torch, ForkingPickler.dumps
        self.pool = torch.cuda.MemPool() if hasattr(torch.cuda, "MemPool") else None
        self.keep: list[Any] = []

    def handle(self, t: Any) -> bytes:
        """Pickled IPC handle of a fresh copy of ``t`` (kept alive until :meth:`release`)."""
        if self.pool is not None:
            with self.torch.cuda.use_mem_pool(self.pool):
                copy = t.detach().clone()
        else:
            copy = t.detach().clone()
        self.torch.cuda.synchronize()
        self.keep.append(copy)
        return bytes(self._dumps(copy))

    def release(self) -> None:
        """Drop the transport copies (the driver cloned them before the candidate ran)."""
        self.keep.clear()
        self.pool = None
