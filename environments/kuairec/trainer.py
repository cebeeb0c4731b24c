"""Trusted side of KuaiRec training: the parameters, the buffers and the optimiser live here.

The sandboxed driver (``sandbox_driver.py train``) only computes gradients (issue 30: a model
that took private optimiser steps inside the driver's own ``backward()`` and wrote its new values
into the driver's reference copies passed every in-process check). :class:`TrustedTrainer` starts
it with :meth:`CandidateRuntime.run` in a background thread and talks to it over a Unix socket in
a fresh directory the sandbox user cannot write (the wire of :mod:`harness.inside.kernel_wire`: a
length-prefixed JSON header declaring every array's dtype and shape, then the raw bytes).

* **Once**, the driver reports every registered parameter and buffer (names, dtypes, shapes,
  initial values: the candidate's architecture and initialisation) and its declared
  ``HYPERPARAMETERS``; both are checked here (caps, floating parameters, finite, bounds).
* **Per step**, this side sends every parameter's and buffer's current value and a batch it drew
  (users, cut points, negatives, a dropout seed); the reply must declare exactly each parameter's
  dtype and shape and carry finite values; then *this* side's AdamW takes the step. The sandbox
  can shape a gradient, never take an extra or a larger step: whatever it does to its own copy is
  overwritten by the next request, and buffers are constants (their build-time values are sent
  every time, so a private optimiser hidden in ``forward`` does not survive a step).
* **Per epoch**, the validation representations and item embeddings at the trusted values.

Every reply is the candidate's bytes: decoded under caps before anything is allocated, and any
failure to decode is the candidate's (``error`` / ``invalid``), never ``infra_error``.
"""

from __future__ import annotations

import io
import math
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from harness.evaluation.errors import CandidateError, CandidateInvalid, CandidateTimeout
from harness.inside import kernel_wire as wire
from harness.scoring.api import CandidateRuntime, ExecResult
from harness.scoring.exchange import ExchangeDir

RULE_EXIT = 3  # sandbox_driver's exit code for a broken rule
NO_CUDA_EXIT = 4  # sandbox_driver: the scorer asked for CUDA, the sandbox has none
FLOATS = ("float64", "float32", "float16", "bfloat16")
MAX_TENSORS = 4096
MAX_NAME = 300
_REASON_CAP = 1500
_DECODE_ERRORS = (KeyError, TypeError, ValueError, IndexError, RecursionError, MemoryError, OverflowError)


def verdict(res: ExecResult, what: str, timeout: float) -> float:
    """The sandboxed driver's exit as the candidate's verdict; its wall seconds if it succeeded.

    Raises:
        CandidateTimeout: A limit ended it.
        CandidateInvalid: It exited for a broken rule (the last stderr line says which).
        CandidateError: Any other failure (never infra_error: the sandbox runs candidate code).
    """
    stderr = res.stderr.decode("utf-8", errors="replace").strip()
    if res.timed_out:
        raise CandidateTimeout(f"{what} hit the {res.limit or 'wall'} limit ({timeout:.0f} s left)")
    if res.returncode == NO_CUDA_EXIT:
        raise CandidateError(
            f"{what}: {stderr[-_REASON_CAP:]} (the sandbox has no GPU access: run `bench doctor --gpu`)"
        )
    if res.returncode == RULE_EXIT:
        last = stderr.splitlines()[-1] if stderr else "rule 'output'"
        raise CandidateInvalid(last[:_REASON_CAP])
    if res.returncode != 0:
        raise CandidateError(f"{what} failed (exit code {res.returncode}): {stderr[-_REASON_CAP:]}")
    return float(res.seconds)


@dataclass(frozen=True)
class TensorSpec:
    """One registered tensor of the candidate's module, as its driver declared it."""

    name: str
    kind: str
    """``param`` (trained here) or ``buffer`` (a constant)."""
    dtype: str
    """Wire dtype name (a torch dtype name)."""
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Limits:
    """What a reply may declare, and the protocol's fixed settings."""

    users: int
    items: int
    """Rows of the item embeddings (``num_items + 1``)."""
    max_rep_bytes: int
    max_item_bytes: int
    max_state_bytes: int
    """Cap on all parameters and buffers together (the trusted side holds about 4x this)."""
    lr: float
    weight_decay: float
    allowed: dict[str, Any]
    """Adjustable hyperparameters and their ``[low, high]`` bounds."""


def hyperparameters(declared: Any, limits: Limits) -> dict[str, float]:
    """The candidate's ``HYPERPARAMETERS`` checked against the manifest's bounds.

    Raises:
        CandidateInvalid: Not a dict, a key that is not adjustable, or a value out of bounds.
    """
    if not isinstance(declared, dict):
        raise CandidateInvalid("rule 'hyperparameters': HYPERPARAMETERS must be a dict")
    hp = {"lr": limits.lr, "weight_decay": limits.weight_decay}
    for k, v in declared.items():
        bounds = limits.allowed.get(k)
        if bounds is None:
            raise CandidateInvalid(
                f"rule 'hyperparameters': {str(k)[:80]!r} is not adjustable "
                f"(allowed: {sorted(limits.allowed)})"
            )
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        if not ok or not float(bounds[0]) <= float(v) <= float(bounds[1]):
            raise CandidateInvalid(
                f"rule 'hyperparameters': {k}={str(v)[:80]} outside [{bounds[0]}, {bounds[1]}]"
            )
        hp[k] = float(v)
    return hp


def _tensor(torch: Any, dtype: str, arr: np.ndarray) -> Any:
    t = torch.from_numpy(arr)
    return t.view(torch.bfloat16) if dtype == "bfloat16" else t


def _host(torch: Any, t: Any) -> np.ndarray:
    """A CPU tensor's bytes as NumPy without a copy (bfloat16 as its 16-bit pattern)."""
    t = t.detach()
    return (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy()


@dataclass
class TrustedTrainer:
    """One candidate's gradient process and the trusted state (use as a context manager)."""

    candidate: CandidateRuntime
    argv: list[str]
    """The driver's command line, without its last argument (the socket's directory)."""
    stdin: bytes
    limits: Limits
    specs: list[TensorSpec] = field(default_factory=list, init=False)
    hp: dict[str, float] = field(default_factory=dict, init=False)
    _values: list[Any] = field(default_factory=list, init=False)
    _opt: Any = field(default=None, init=False)
    _ex: ExchangeDir | None = field(default=None, init=False)
    _sock: socket.socket | None = field(default=None, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)
    _result: list[ExecResult | BaseException] = field(default_factory=list, init=False)
    _timeout: float = field(default=0.0, init=False)

    def __enter__(self) -> TrustedTrainer:
        """Start the driver, receive the module's tensors and hyperparameters, build AdamW.

        Raises:
            CandidateError: The driver failed before it connected, or its report is malformed.
            CandidateInvalid: A rule is broken (hyperparameters, dtypes, sizes, non-finite values).
            CandidateTimeout: The evaluation's budget ran out.
        """
        c = self.candidate
        ex = self._ex = ExchangeDir(Path(c.workdir), "kuairec-train", writable=False)
        lst = ex.listen_unix("s")  # the directory stays 0755: only the socket is the sandbox's to use
        try:
            self._timeout = max(c.remaining(), 0.0)
            if self._timeout <= 0:
                raise CandidateTimeout("no time left to train")
            self._thread = threading.Thread(target=self._run, args=(ex.name,), daemon=True)
            self._thread.start()
            lst.settimeout(1.0)
            while self._sock is None:
                try:
                    self._sock, _ = lst.accept()
                except TimeoutError:
                    if not self._thread.is_alive() or c.remaining() <= 0:
                        self._fail("starting the training driver")
        finally:
            lst.close()
            ex.unlink("s")  # nobody else can connect now
        self._ready()
        return self

    def __exit__(self, *exc: object) -> None:
        """Stop the driver and release the socket's directory."""
        self.close()

    def _run(self, name: str) -> None:
        try:
            self._result.append(self.candidate.run([*self.argv, name], self.stdin, timeout=self._timeout))
        except BaseException as e:  # handed to the scorer's thread by _fail
            self._result.append(e)

    def _fail(self, what: str) -> None:
        """Raise the candidate's verdict for a driver that stopped answering."""
        if self._thread is not None:
            self._thread.join(timeout=30.0)
        res = self._result[0] if self._result else None
        if isinstance(res, BaseException):
            raise res
        if res is None:
            raise CandidateTimeout(f"{what}: no answer within the evaluation's budget")
        verdict(res, what, self._timeout)
        raise CandidateError(f"{what}: the training driver closed the connection")

    def _recv(self, what: str, kind: str) -> tuple[dict[str, Any], list[tuple[str, tuple[int, ...]]]]:
        """The next reply's header (of type ``kind``) and its declared array specs, validated."""
        assert self._sock is not None
        self._sock.settimeout(max(self.candidate.remaining() + 5.0, 0.1))
        try:
            header = wire.recv_header(self._sock)
            specs = wire.array_specs(header)
        except (EOFError, ConnectionError, TimeoutError):
            self._fail(what)
        except _DECODE_ERRORS as e:  # the candidate's bytes: its error, never the harness's
            raise CandidateError(
                f"{what}: malformed reply from the sandbox: {type(e).__name__}: {e}"
            ) from None
        if header.get("type") != kind:
            raise CandidateError(f"{what}: expected a {kind!r} reply, got {str(header.get('type'))[:80]!r}")
        return header, specs

    def _arrays(self, specs: list[tuple[str, tuple[int, ...]]], what: str) -> list[np.ndarray]:
        try:
            return [a for _, a in wire.recv_arrays(self._sock, specs)]
        except (EOFError, ConnectionError, TimeoutError):
            self._fail(what)
        raise AssertionError("unreachable")

    def _send(self, header: dict[str, Any], arrays: list[tuple[str, np.ndarray]], what: str) -> None:
        assert self._sock is not None
        try:
            wire.send(self._sock, header, arrays)
        except OSError:
            self._fail(what)

    def _ready(self) -> None:
        import torch

        what = "building the model"
        header, shapes = self._recv(what, "ready")
        raw = header.get("tensors")
        if not isinstance(raw, list) or len(raw) != len(shapes) or len(raw) > MAX_TENSORS:
            raise CandidateError(f"{what}: the tensor list does not match its arrays (at most {MAX_TENSORS})")
        for t, (dtype, shape) in zip(raw, shapes, strict=True):
            name, kind = (t.get("name"), t.get("kind")) if isinstance(t, dict) else (None, None)
            if not isinstance(name, str) or not 0 < len(name) <= MAX_NAME or kind not in ("param", "buffer"):
                raise CandidateError(f"{what}: malformed tensor entry {str(t)[:120]}")
            if kind == "param" and dtype not in FLOATS:
                raise CandidateInvalid(
                    f"rule 'output': parameter {name} has dtype {dtype}, not one of {FLOATS}"
                )
            self.specs.append(TensorSpec(name, kind, dtype, shape))
        if len({s.name for s in self.specs}) != len(self.specs):
            raise CandidateError(f"{what}: two tensors share a name")
        size = wire.nbytes(shapes)
        if size > self.limits.max_state_bytes:
            raise CandidateInvalid(
                f"rule 'output': parameters and buffers take {size} bytes, over the "
                f"{self.limits.max_state_bytes}-byte cap (max_checkpoint_mb)"
            )
        self.hp = hyperparameters(header.get("hyperparameters"), self.limits)
        for spec, arr in zip(self.specs, self._arrays(shapes, what), strict=True):
            t = _tensor(torch, spec.dtype, arr)
            if spec.kind == "param":
                if not bool(torch.isfinite(t).all()):
                    raise CandidateInvalid(f"rule 'finite': the initial value of {spec.name} is not finite")
                t.requires_grad_(True)
            self._values.append(t)
        params = self.params()
        if params:
            self._opt = torch.optim.AdamW(params, lr=self.hp["lr"], weight_decay=self.hp["weight_decay"])

    def params(self) -> list[Any]:
        """The trusted parameter tensors, in the order the driver declared them."""
        return [t for s, t in zip(self.specs, self._values, strict=True) if s.kind == "param"]

    def _state_arrays(self) -> list[tuple[str, np.ndarray]]:
        import torch

        return [(s.dtype, _host(torch, t)) for s, t in zip(self.specs, self._values, strict=True)]

    def step(self, step: int, seed: int, users: np.ndarray, cuts: np.ndarray, negatives: np.ndarray) -> None:
        """One step: send the trusted values and the batch, check the gradients, step AdamW here.

        Raises:
            CandidateInvalid: The gradients declare other dtypes or shapes than the parameters', or
                hold NaN / infinite values; or the driver broke a rule.
            CandidateError: The driver failed or its reply is malformed.
            CandidateTimeout: The evaluation's budget ran out.
        """
        import torch

        what = f"training step {step}"
        batch = [("int64", np.ascontiguousarray(a, dtype=np.int64)) for a in (users, cuts, negatives)]
        self._send({"op": "step", "step": step, "seed": seed}, [*self._state_arrays(), *batch], what)
        header, specs = self._recv(what, "grads")
        params = [s for s in self.specs if s.kind == "param"]
        expect = [(s.dtype, s.shape) for s in params]
        if specs != expect:
            raise CandidateInvalid(
                f"rule 'output': {what}: the gradients declare {specs!s:.300}, expected {expect!s:.300}"
            )
        missing = header.get("missing", [])
        if not isinstance(missing, list) or not all(type(i) is int and 0 <= i < len(params) for i in missing):
            raise CandidateError(f"{what}: malformed reply from the sandbox: bad 'missing' list")
        grads = self._arrays(specs, what)
        for i, (spec, t, g) in enumerate(zip(params, self.params(), grads, strict=True)):
            grad = _tensor(torch, spec.dtype, g)
            if not bool(torch.isfinite(grad).all()):
                raise CandidateInvalid(f"rule 'finite': {what}: the gradient of {spec.name} is not finite")
            t.grad = None if i in missing else grad
        if self._opt is not None:
            self._opt.step()

    def represent(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """The validation representations and item embeddings at the trusted values (float32).

        Raises:
            CandidateInvalid: Other shapes than ``[users, d]`` and ``[items, d]`` within the caps,
                or NaN / infinite values; or the driver broke a rule.
            CandidateError: The driver failed or its reply is malformed.
            CandidateTimeout: The evaluation's budget ran out.
        """
        what, lim = f"validation pass of epoch {epoch}", self.limits
        self._send({"op": "represent", "epoch": epoch}, self._state_arrays(), what)
        _, specs = self._recv(what, "reps")
        d = specs[1][1][1] if len(specs) == 2 and len(specs[1][1]) == 2 else -1
        expect = [("float32", (lim.users, d)), ("float32", (lim.items, d))]
        if (
            d < 1
            or specs != expect
            or 4 * lim.users * d > lim.max_rep_bytes
            or 4 * lim.items * d > lim.max_item_bytes
        ):
            raise CandidateInvalid(
                f"rule 'output': {what}: the reply declares {specs!s:.300}; expected float32 "
                f"[{lim.users}, d] and [{lim.items}, d] with d at most {lim.max_rep_bytes // (4 * lim.users)}"
            )
        reps, emb = self._arrays(specs, what)
        for name, arr in (("representations", reps), ("item embeddings", emb)):
            bad = int(np.count_nonzero(~np.isfinite(arr)))
            if bad:
                raise CandidateInvalid(f"rule 'finite': {bad} NaN or infinite values in the {what}'s {name}")
        return reps, emb

    def state(self) -> dict[str, Any]:
        """A copy of every trusted parameter and buffer by name (the checkpoint's content)."""
        return {s.name: t.detach().clone() for s, t in zip(self.specs, self._values, strict=True)}

    def finish(self) -> float:
        """Stop the driver and wait for it; its wall seconds.

        Raises:
            CandidateError: It failed after training.
            CandidateInvalid: It exited for a broken rule.
            CandidateTimeout: It ran out of time.
        """
        self._send({"op": "stop"}, [], "stopping the training driver")
        assert self._sock is not None and self._thread is not None
        self._sock.close()
        self._sock = None
        self._thread.join(timeout=max(self.candidate.remaining(), 0.0) + 30.0)
        res = self._result[0] if self._result else None
        if isinstance(res, BaseException):
            raise res
        if res is None:
            raise CandidateTimeout("the training driver did not exit after the last step")
        return verdict(res, "training", self._timeout)

    def close(self) -> None:
        """Release everything (idempotent)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._thread is not None:
            self._thread.join(timeout=10.0)
            self._thread = None
        if self._ex is not None:
            self._ex.close()
            self._ex = None


def checkpoint_file(state: dict[str, Any]) -> bytes:
    """``torch.save`` of the trusted state, for the test process's ``torch.load(weights_only=True)``."""
    import torch

    buf = io.BytesIO()
    torch.save(state, buf)
    return buf.getvalue()
