"""Candidate-side server, run INSIDE the sandbox: load one program and answer calls (``serve FD``).

Reached through :mod:`.shim` (``python -m harness.inside.shim serve ...``) or as a child of the
zygote (:mod:`.zygote`). Nothing here is secret; the candidate may read it and, once its module is
loaded, everything in this process is the candidate's: the trusted side decodes replies with limits.
"""

from __future__ import annotations

import importlib.util
import os
import resource
import socket
import sys
import traceback

from . import wire

_TB_LIMIT = 4000


def candidate_traceback(exc: BaseException, path: str) -> str:
    """The traceback of a failed load as the candidate should see it: its own frames only.

    Loading runs through this server and ``importlib``; those frames say nothing about the
    candidate's program and bury its line (a syntax error's caret, the line that raised) under
    ten lines of machinery. Frames of other files the candidate's code called (a library it
    imported) stay once its own frame has been entered.
    """
    frames = traceback.extract_tb(exc.__traceback__)
    first = next((i for i, f in enumerate(frames) if f.filename == path), len(frames))
    own = frames[first:]
    head = ["Traceback (most recent call last):\n", *traceback.format_list(own)] if own else []
    return "".join(head + traceback.format_exception_only(type(exc), exc))


def _error_reply(kind: str, exc: BaseException, path: str | None = None) -> dict:
    if path is not None:
        tb = candidate_traceback(exc, path)
    else:
        tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {
        "type": "error",
        "kind": kind,
        "exc": type(exc).__name__,
        "message": str(exc)[:_TB_LIMIT],
        "traceback": tb[-_TB_LIMIT:],
    }


def _load_driver(source: str) -> object:
    """Load the family's sandbox driver (trusted, non-secret code) as module ``evobench_driver``."""
    spec = importlib.util.spec_from_loader("evobench_driver", loader=None)
    assert spec is not None
    driver = importlib.util.module_from_spec(spec)
    sys.modules["evobench_driver"] = driver
    exec(compile(source, "<evobench_driver>", "exec"), driver.__dict__)  # noqa: S102 - harness code
    return driver


def serve(sock: socket.socket) -> None:
    """Answer ``load`` / ``call`` / ``exit`` requests until the peer closes.

    ``load`` may carry ``driver`` (source text): it is loaded after the candidate, and a ``call``
    with ``driver: true`` runs ``driver.<fn>(candidate_module, *args)`` instead of ``candidate.<fn>``.
    """
    module = None
    driver = None
    wire.send_message(sock, {"type": "ready", "pid": os.getpid()})
    while True:
        try:
            req = wire.recv_message(sock)
        except EOFError:
            os._exit(0)
        op = req.get("op") if isinstance(req, dict) else None
        if op == "load":
            path: str | None = None
            try:
                path = os.path.join(os.getcwd(), req["filename"])
                with open(path, "w", encoding="utf-8") as f:
                    f.write(req["source"])
                spec = importlib.util.spec_from_file_location("candidate", path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules["candidate"] = module
                spec.loader.exec_module(module)
                path = None  # a driver that fails to load is the harness's fault: its full traceback
                if req.get("driver"):
                    driver = _load_driver(req["driver"])
                reply = {"type": "loaded"}
            except BaseException as e:  # noqa: BLE001 - report anything the candidate raises
                reply = _error_reply("load", e, path)
        elif op == "call":
            try:
                if req.get("driver"):
                    fn = getattr(driver, req["fn"], None)
                    if not callable(fn):
                        raise RuntimeError(f"the sandbox driver has no function {req['fn']!r}")
                    value = fn(module, *req["args"])
                else:
                    fn = getattr(module, req["fn"], None)
                    if not callable(fn):
                        raise AttributeError(f"candidate has no function {req['fn']!r}")
                    value = fn(*req["args"])
                payload = wire.encode({"type": "result", "value": value})
            except BaseException as e:  # noqa: BLE001
                payload = wire.encode(_error_reply("call", e))
            sock.sendall(wire._LEN.pack(len(payload)) + payload)
            continue
        elif op == "echo":
            # Transport calibration by the trusted side, before any candidate code is loaded.
            reply = {"type": "result", "value": req.get("args")}
        elif op == "exit":
            os._exit(0)
        else:
            reply = {
                "type": "error",
                "kind": "protocol",
                "exc": "ProtocolError",
                "message": f"bad op {op!r}",
                "traceback": "",
            }
        wire.send_message(sock, reply)


def apply_limits(limits: dict) -> None:
    """Set each named rlimit (soft = hard) to its value."""
    for name, value in limits.items():
        res = getattr(resource, name)
        resource.setrlimit(res, (int(value), int(value)))


def limit_data(headroom: int) -> None:
    """Fallback memory limit: ``RLIMIT_DATA`` = private writable memory now + ``headroom`` bytes.

    Counted from the current size, so the interpreter and pre-imported modules (inherited from a
    zygote, or imported before any candidate code) are not charged to the candidate.
    """
    if headroom <= 0:
        return
    now = 0
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmData:"):
                now = int(line.split()[1]) * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (now + headroom, now + headroom))
