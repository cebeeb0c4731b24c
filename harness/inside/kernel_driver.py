"""Kernel driver: runs INSIDE the sandbox, loaded before the candidate's code (untrusted process).

Started as ``python -I -B -m harness.inside.kernel_driver DIR`` (through the harness's inside
launcher, see ``harness/sandbox/isolation.py`` ``inside_argv``), it connects to the scorer's Unix
socket ``DIR/s``, records the original timing primitives, imports ``DIR/candidate.py`` and then
serves requests one at a time. Each request carries only the inputs of its calls (``reps``
distinct input sets, run back to back under one clock; never a reference output, weights the
checker keeps to itself, or the seed of a later input); the reply carries every call's output and
the times. Timing: ``torch.cuda.synchronize()``, optional L2 flush, then CUDA events on the current
stream bracketed by host ``perf_counter_ns`` (on CPU only the host clock, labelled as such by the
scorer). After every request: timing primitives must still be the originals, the event time must
not exceed the host time bracketing it, no Python thread may be left running, inputs must be
unchanged (except declared outputs such as a KV cache) and each output must be a plain
``torch.Tensor`` on the evaluation's device (no subclass, no lazy object).

Everything in this process is the candidate's once its module is imported: the scorer bounds what
it reports. The trusted calibration echo (``harness/kernels/echo.py``) reuses :class:`Driver`'s
request loop in a process of its own. Exit codes: 0 done, 3 a task rule is broken (also reported
on the socket), anything else an error.
"""

import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from .kernel_wire import decode_tree, encode_tree, recv, send

RULE_EXIT = 3


class RuleBroken(Exception):
    """A task rule the candidate broke (reported as invalid, with the reason)."""


def os_threads() -> int:
    """Threads of this process as the kernel sees them (``_thread`` and native threads included)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # not Linux: the best Python can see
        return threading.active_count()


class Driver:
    """Serves one candidate's calls (see the module docstring)."""

    def __init__(self, here: str, params: dict[str, Any], torch: Any) -> None:
        self.here, self.p, self.torch = here, params, torch
        self.device = params["device"]
        self.cuda = self.device == "cuda"
        self.perf_ns = time.perf_counter_ns
        self.equal = torch.equal
        self.originals = self._primitives()
        self.flush = None
        if self.cuda and int(params.get("l2_flush_bytes", 0)) > 0:
            self.flush = torch.empty(int(params["l2_flush_bytes"]) // 8, dtype=torch.int64, device="cuda")
        # Torch starts its pools (intra-op threads, the CUDA context) on first use: do that now, so
        # the baseline below is what an idle driver has.
        a = torch.ones(64, 64, device=self.device)
        float((a @ a).sum())
        self.threads = os_threads()
        self.first_call = True
        self.rebase_pending = False

    def rebase_threads(self) -> None:
        """Count threads started while the candidate's module was imported into the baseline.

        They are the candidate's, but an honest import may start some (compiler pools); a thread
        that defers a call's work is bounded by the trusted round trip instead.
        """
        self.threads = max(self.threads, os_threads())

    def _primitives(self) -> dict[str, Any]:
        t = self.torch
        found = {
            "time.perf_counter": time.perf_counter,
            "time.perf_counter_ns": time.perf_counter_ns,
            "time.time": time.time,
            "time.monotonic": time.monotonic,
            "torch.equal": t.equal,
            # Checked on CPU too: the classes exist in CPU builds, and patching them is never honest.
            "torch.cuda.synchronize": t.cuda.synchronize,
            "torch.cuda.Event": t.cuda.Event,
            "torch.cuda.Event.record": t.cuda.Event.record,
            "torch.cuda.Event.elapsed_time": t.cuda.Event.elapsed_time,
            "torch.cuda.Event.synchronize": t.cuda.Event.synchronize,
        }
        return found

    def check_integrity(self, after_first_call: bool = False) -> None:
        """Timing primitives are the originals and no thread was added since the baseline.

        Threads are counted by the OS (``/proc/self/task``), which takes no Python lock: a raw
        ``_thread`` thread holding ``threading._active_limbo_lock`` can neither hide nor stall it.
        """
        now = self._primitives()
        for k, v in self.originals.items():
            if now[k] is not v:
                raise RuleBroken(f"rule 'timing': {k} was replaced")
        n = os_threads()
        if after_first_call:
            # Compile-on-first-call pools (torch.compile's inductor workers, Triton autotuning) are
            # started by an honest first call and stay idle. Threads still alive when the next call
            # starts join the baseline (transient ones have ended by then); any later call that
            # leaves a new thread is flagged. Work deferred to a kept thread is bounded by the
            # trusted round trip (the guarantee), not by this check.
            self.rebase_pending = True
            return
        if self.rebase_pending:
            self.threads, self.rebase_pending = max(self.threads, n), False
        if n > self.threads:
            raise RuleBroken(f"rule 'threads': {n - self.threads} thread(s) still running after the call")

    def leaf(self, arr: np.ndarray, dtype: str) -> Any:
        """A tensor on the evaluation's device from a received array.

        Inputs arrive as host bytes and are copied to the device before the clock starts (no CUDA
        IPC: legacy handles cannot cross the sandbox's PID namespace).
        """
        t = self.torch.from_numpy(arr)  # ``arr`` was allocated for this message: no copy needed
        if dtype == "bfloat16":
            t = t.view(self.torch.bfloat16)
        return t.to(self.device)

    def tensors(self, tree: Any) -> list[Any]:
        """The tensors of an argument tree, in order."""
        if isinstance(tree, (list, tuple)):
            return [x for v in tree for x in self.tensors(v)]
        if isinstance(tree, dict):
            return [x for v in tree.values() for x in self.tensors(v)]
        return [tree] if self.torch.is_tensor(tree) else []

    def check_output(self, out: Any) -> None:
        """Outputs are plain tensors on the evaluation's device (or tuples of them)."""
        t = self.torch
        if isinstance(out, (list, tuple)):
            for o in out:
                self.check_output(o)
            return
        if type(out) is not t.Tensor:
            raise RuleBroken(f"rule 'output': expected a plain torch.Tensor, got {type(out).__name__}")
        if out.device.type != self.device:
            raise RuleBroken(f"rule 'output': output is on {out.device}, expected {self.device}")

    def timed(self, fn: Callable[[Any], Any], calls: list[Any]) -> tuple[list[Any], float, float | None]:
        """``fn`` on each of ``calls`` back to back under one clock.

        Returns:
            The outputs (one per call), host seconds and event seconds (or None) for all of them.

        On CUDA the timed region ends with a device-wide ``torch.cuda.synchronize()``, so work on
        side streams is inside the host time (the events only see the current stream).
        """
        t = self.torch
        sync: Any = self.originals.get("torch.cuda.synchronize")
        if self.cuda:
            if self.flush is not None:
                self.flush.zero_()
            sync()
            start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        self.check_integrity()
        t0 = self.perf_ns()
        if self.cuda:
            self.originals["torch.cuda.Event.record"](start)
        outs = [fn(args) for args in calls]
        if self.cuda:
            self.originals["torch.cuda.Event.record"](end)
            sync()
        t1 = self.perf_ns()
        self.check_integrity(after_first_call=self.first_call)
        self.first_call = False
        host = (t1 - t0) / 1e9
        event = None
        if self.cuda:
            event = self.originals["torch.cuda.Event.elapsed_time"](start, end) / 1e3
            if not event <= host:
                raise RuleBroken(f"rule 'timing': event time {event:.6g} s exceeds host time {host:.6g} s")
        return outs, host, event

    def _forward(self, model: Any) -> Callable[[Any], Any]:
        def call(args: Any) -> Any:
            with self.torch.no_grad():
                return model(*args)

        return call

    def kernel(self, fn: Callable[[Any], Any] | None, header: dict[str, Any], n: int) -> Callable[[Any], Any]:
        """The callable a call request runs ``n`` times: the candidate's (a subclass may swap it)."""
        if fn is None:
            raise ValueError("call before the model was built")
        return fn

    def unpack(
        self, header: dict[str, Any], arrays: list[tuple[str, np.ndarray]], mutable: set[int]
    ) -> tuple[list[Any], list[tuple[Any, Any]]]:
        """A call request's argument trees, and (tensor, copy) pairs of the inputs to keep unchanged.

        ``stacked``: one argument tree whose every array holds ``reps`` input sets along a new
        first axis (rep ``r`` gets the views ``[r]``), so a batch costs one transfer and one copy
        per input, not per call; else ``calls`` lists one tree per call.
        """
        if header.get("stacked"):
            reps = int(header["reps"])
            base = [(d, self.leaf(a, d)) for d, a in arrays]
            if any(t.dim() == 0 or t.shape[0] != reps for _, t in base):
                raise ValueError("stacked input without a leading axis of size reps")
            calls = [decode_tree(header["args"], base, _row(r)) for r in range(reps)]
            return calls, [(t, t.clone()) for i, (_, t) in enumerate(base) if i not in mutable]
        calls = [decode_tree(c, arrays, self.leaf) for c in header["calls"]]
        keep = []
        for args in calls:
            keep += [(x, x.clone()) for i, x in enumerate(self.tensors(args)) if i not in mutable]
        return calls, keep

    def serve(self, sock: Any, module: Any) -> None:
        """Answer requests until ``stop`` (or EOF); ``module`` None: no candidate (the echo)."""
        fn = None if module is None else getattr(module, self.p["entry"])
        mutable = set(self.p.get("mutable", []))
        while True:
            header, arrays = recv(sock)
            if header.get("op") == "stop":
                return
            if header.get("op") == "init":  # KernelBench: build entry(*args) under a seed, then call it
                try:
                    self.torch.manual_seed(int(header["seed"]))
                    model = getattr(module, self.p["entry"])(*decode_tree(header["args"], arrays, self.leaf))
                    model = model.to(self.device)
                    fn = self._forward(model)
                except Exception as e:
                    tb = traceback.format_exc()[-2000:]
                    send(sock, {"type": "error", "message": f"{type(e).__name__}: {e}", "traceback": tb})
                    continue
                send(sock, {"type": "ready"})
                continue
            # A request carries ``reps`` distinct input sets, run back to back under one clock (a
            # batch makes kernels shorter than the transport measurable by the trusted round trip;
            # distinct inputs, each output checked, make a cache of earlier outputs useless).
            calls, keep = self.unpack(header, arrays, mutable)
            try:
                call = self.kernel(fn, header, len(calls))
                outs, host, event = self.timed(call, calls)
                self.check_output(outs)
                # The outputs are copied out now: work finishing later cannot change what is checked.
                reply_arrays: list[tuple[str, np.ndarray]] = []
                tree = encode_tree(outs, self.torch, reply_arrays)
                for i, (x, before) in enumerate(keep):
                    if not self.equal(x, before):
                        raise RuleBroken(f"rule 'inputs': input tensor {i} was modified in place")
            except RuleBroken as e:
                send(sock, {"type": "rule", "message": str(e)})
                raise
            except Exception as e:
                tb = traceback.format_exc()[-2000:]
                send(sock, {"type": "error", "message": f"{type(e).__name__}: {e}", "traceback": tb})
                continue
            send(sock, {"type": "result", "out": tree, "host": host, "event": event}, reply_arrays)


def _row(r: int) -> Callable[[Any, str], Any]:
    """``to_leaf`` for rep ``r`` of a stacked request: the view ``[r]`` of each stacked input."""
    return lambda t, d: t[r]


def _candidate(here: str, entry: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("candidate", os.path.join(here, "candidate.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    if not callable(getattr(module, entry, None)):
        raise AttributeError(f"the candidate has no function {entry!r}")
    return module


def _steady_allocator() -> None:
    """Fix glibc malloc's mmap and trim thresholds (which also turns off their adaptation).

    By default an allocation of 128 KiB or more is a fresh ``mmap`` (a page fault per page on
    first touch, counted as the sandbox's CPU) until a free raises the threshold, and the heap's
    top is trimmed back to the OS and faulted in again; which of these a request's inputs, clones
    and outputs hit depends on the process's allocation history. Two sessions of the same program
    then differed by up to 1.8x in median CPU per call (KernelBench-tiny's speedup CV 14.5 % over
    6 evaluations beside two busy processes; 6.6 % with this). Buffers up to 32 MiB (glibc's
    largest threshold) now come from a heap that keeps what it was given. Not glibc (no
    ``mallopt``): nothing changes. The candidate may call ``mallopt`` itself; it only moves its
    own figure, which the OS still counts in full.
    """
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    mallopt(m_mmap_threshold, 32 << 20)
    mallopt(m_trim_threshold, 1 << 30)


def main() -> None:
    """Connect, load the candidate, serve calls (see the module docstring)."""
    import socket

    sys.dont_write_bytecode = True
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m harness.inside.kernel_driver EXCHANGE_DIR")
    here = os.path.abspath(sys.argv[1])
    with open(os.path.join(here, "params.json")) as f:
        p = json.load(f)
    _steady_allocator()
    import torch

    torch.set_num_threads(max(1, int(p.get("threads", 1))))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.path.join(here, "s"))
    driver = Driver(here, p, torch)
    try:
        module = _candidate(here, p["entry"])
    except BaseException as e:
        send(sock, {"type": "error", "message": f"loading the program failed: {type(e).__name__}: {e}"})
        os._exit(1)
    driver.rebase_threads()
    send(sock, {"type": "ready"})
    try:
        driver.serve(sock, module)
    except RuleBroken as e:
        sys.stderr.write(f"{e}\n")
        sys.stderr.flush()
        os._exit(RULE_EXIT)
    except EOFError:
        pass
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
