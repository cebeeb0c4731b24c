"""Trusted kernel driver: runs INSIDE the sandbox, loaded before the candidate's code.

``python -I -B <dir>/kernel_driver.py`` connects to the scorer's Unix socket ``<dir>/s``, records
the original timing primitives, imports ``<dir>/candidate.py`` and then serves requests one at a
time. Each request carries only the inputs of one call (never a reference output, weights the
checker keeps to itself, or the seed of a later input); the reply carries the output and the
times. Timing: ``torch.cuda.synchronize()``, optional L2 flush, then CUDA events on the current
stream bracketed by host ``perf_counter_ns`` (on CPU only the host clock, labelled as such by the
scorer). After every call: timing primitives must still be the originals, the event time must not
exceed the host time bracketing it, no Python thread may be left running, inputs must be
unchanged (except declared outputs such as a KV cache) and each output must be a plain
``torch.Tensor`` on the evaluation's device (no subclass, no lazy object).

This file imports nothing from the harness: the scorer imports it only for the wire codec below.
Exit codes: 0 done, 3 a task rule is broken (also reported on the socket), anything else an error.
"""

import io
import json
import os
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

RULE_EXIT = 3
_LEN = struct.Struct(">Q")


class RuleBroken(Exception):
    """A task rule the candidate broke (reported as invalid, with the reason)."""


# -- wire: header JSON + .npz payload, each length-prefixed --------------------------------------
def send(sock: Any, header: dict[str, Any], arrays: dict[str, np.ndarray] | None = None) -> None:
    """Send one message: a JSON header and named NumPy arrays (``.npz``, no pickle)."""
    payload = b""
    if arrays:
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        payload = buf.getvalue()
    head = json.dumps(header).encode()
    sock.sendall(_LEN.pack(len(head)) + head + _LEN.pack(len(payload)) + payload)


def _exact(sock: Any, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        b = sock.recv(min(n - got, 1 << 20))
        if not b:
            raise EOFError("connection closed")
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def recv(
    sock: Any, max_header: int = 1 << 20, max_payload: int = 1 << 40
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Receive one message; lengths over the caps raise ``ValueError`` before anything is read."""
    (n,) = _LEN.unpack(_exact(sock, 8))
    if n > max_header:
        raise ValueError(f"header of {n} bytes over the {max_header}-byte cap")
    header = json.loads(_exact(sock, n))
    (m,) = _LEN.unpack(_exact(sock, 8))
    if m > max_payload:
        raise ValueError(f"payload of {m} bytes over the {max_payload}-byte cap")
    arrays = {}
    if m:
        with np.load(io.BytesIO(_exact(sock, m)), allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return header, arrays


# bfloat16 has no NumPy dtype: it travels as its raw 16-bit pattern, tagged.
_RAW16 = {"bfloat16": "int16"}


def encode_tree(
    tree: Any, torch: Any, arrays: dict[str, np.ndarray], ipc: Callable[[Any], bytes] | None = None
) -> Any:
    """Nested lists / dicts / tensors / numbers -> JSON tree, tensors moved into ``arrays``.

    With ``ipc`` (trusted side, CUDA only), a CUDA tensor travels as the bytes ``ipc`` returns
    (a pickled CUDA IPC handle of a transport copy) instead of its values.
    """
    if isinstance(tree, (list, tuple)):
        return [encode_tree(x, torch, arrays, ipc) for x in tree]
    if isinstance(tree, dict):
        return {"__dict__": {str(k): encode_tree(v, torch, arrays, ipc) for k, v in tree.items()}}
    if ipc is not None and torch.is_tensor(tree) and tree.is_cuda:
        name = f"a{len(arrays)}"
        arrays[name] = np.frombuffer(ipc(tree), dtype=np.uint8)
        return {"__tensor__": name, "dtype": "ipc:" + str(tree.dtype).replace("torch.", "")}
    if torch is not None and torch.is_tensor(tree):
        t = tree.detach().to("cpu").contiguous()
        dtype = str(t.dtype).replace("torch.", "")
        if dtype in _RAW16:
            t = t.view(getattr(torch, _RAW16[dtype]))
        name = f"a{len(arrays)}"
        arrays[name] = t.numpy()
        return {"__tensor__": name, "dtype": dtype}
    if isinstance(tree, np.ndarray):
        name = f"a{len(arrays)}"
        arrays[name] = tree
        return {"__tensor__": name, "dtype": str(tree.dtype)}
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    raise TypeError(f"cannot send a {type(tree).__name__}")


def decode_tree(tree: Any, arrays: dict[str, np.ndarray], to_leaf: Callable[[np.ndarray, str], Any]) -> Any:
    """Inverse of ``encode_tree``; ``to_leaf(array, dtype)`` builds each tensor."""
    if isinstance(tree, list):
        return [decode_tree(x, arrays, to_leaf) for x in tree]
    if isinstance(tree, dict) and "__dict__" in tree:
        return {k: decode_tree(v, arrays, to_leaf) for k, v in tree["__dict__"].items()}
    if isinstance(tree, dict) and "__tensor__" in tree:
        return to_leaf(arrays[tree["__tensor__"]], str(tree["dtype"]))
    return tree


# -- in-sandbox side ------------------------------------------------------------------------------
class Driver:
    """Serves one candidate's calls (see the module docstring)."""

    def __init__(self, here: str, params: dict[str, Any], torch: Any) -> None:
        self.here, self.p, self.torch = here, params, torch
        self.device = params["device"]
        self.cuda = self.device == "cuda"
        self.perf_ns = time.perf_counter_ns
        self.equal = torch.equal
        self.originals = self._primitives()
        self.threads = threading.active_count()
        self.flush = None
        if self.cuda and int(params.get("l2_flush_bytes", 0)) > 0:
            self.flush = torch.empty(int(params["l2_flush_bytes"]) // 8, dtype=torch.int64, device="cuda")

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

    def check_integrity(self) -> None:
        """Timing primitives are the originals and no Python thread is left running."""
        now = self._primitives()
        for k, v in self.originals.items():
            if now[k] is not v:
                raise RuleBroken(f"rule 'timing': {k} was replaced")
        if threading.active_count() > self.threads:
            raise RuleBroken("rule 'threads': a Python thread is still running after the call")

    def leaf(self, arr: np.ndarray, dtype: str) -> Any:
        """A fresh tensor on the evaluation's device from a received array (or CUDA IPC handle)."""
        if dtype.startswith("ipc:"):
            import pickle

            import torch.multiprocessing  # noqa: F401 - registers the CUDA tensor reductions

            shared = pickle.loads(arr.tobytes())  # written by the trusted scorer, not the candidate
            # A private copy: the candidate never holds memory mapped from the scorer's process.
            t = shared.clone()
            self.torch.cuda.synchronize()
            del shared
            return t
        t = self.torch.from_numpy(np.array(arr, copy=True))
        if dtype in _RAW16:
            t = t.view(getattr(self.torch, dtype))
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

    def timed(self, fn: Callable[[Any], Any], args: Any) -> tuple[Any, float, float | None]:
        """One call under the clock; returns (output, host seconds, event seconds or None)."""
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
        out = fn(args)
        if self.cuda:
            self.originals["torch.cuda.Event.record"](end)
            sync()
        t1 = self.perf_ns()
        self.check_integrity()
        host = (t1 - t0) / 1e9
        event = None
        if self.cuda:
            event = self.originals["torch.cuda.Event.elapsed_time"](start, end) / 1e3
            if not event <= host:
                raise RuleBroken(f"rule 'timing': event time {event:.6g} s exceeds host time {host:.6g} s")
        return out, host, event

    def _forward(self, model: Any) -> Callable[[Any], Any]:
        def call(args: Any) -> Any:
            with self.torch.no_grad():
                return model(*args)

        return call

    def serve(self, sock: Any, module: Any) -> None:
        """Answer requests until ``stop`` (or EOF)."""
        fn = getattr(module, self.p["entry"])
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
            args = decode_tree(header["args"], arrays, self.leaf)
            leaves = self.tensors(args)
            keep = [(x, x.clone()) for i, x in enumerate(leaves) if i not in mutable]
            try:
                out, host, event = self.timed(fn, args)
                self.check_output(out)
                # The output is copied out now: work finishing later cannot change what is checked.
                reply_arrays: dict[str, np.ndarray] = {}
                tree = encode_tree(out, self.torch, reply_arrays)
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


def main() -> None:
    """Connect, load the candidate, serve calls (see the module docstring)."""
    import socket

    sys.dont_write_bytecode = True
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "params.json")) as f:
        p = json.load(f)
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
