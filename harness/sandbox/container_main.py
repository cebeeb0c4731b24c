"""The trusted evaluation server inside an evobench container image.

Started by the Docker backend as ``python -m harness.sandbox.container_main --socket PATH --slot N``.
It listens on a Unix socket in a host-mounted directory (the container has no network), accepts
one connection from the host and answers evaluation jobs with ``EvalResult`` JSON, using the same
``worker.evaluate`` as the local backend. The Modal backend starts it with ``--stdio`` instead:
requests arrive on stdin and replies leave on stdout as protocol lines (``stdio_wire``), since a
remote sandbox offers its standard streams and no inbound network. Candidates run as a separate
unprivileged uid (see ``isolation.detect_isolation``: level ``container``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
from typing import Any

from harness.inside import wire

from . import stdio_wire
from .prefork import PreforkedZygote
from .worker import EvalJob, WorkerState, evaluate


def _prewarm(state: WorkerState, prewarm: list[str], preforked: PreforkedZygote | None = None) -> None:
    """Start each prewarmed variant's zygote and scorer; adopt ``preforked`` where it matches."""
    for env_id in prewarm:
        v = state.registry(None).get(env_id)
        if preforked is not None and preforked.matches(v.hardware, v.preload, state.uid):
            state.adopt_zygote(v, preforked)
            start, preforked = preforked.wait_ready, None
        else:
            start = state.zygote(v).start
        # The zygote's imports (another process) overlap the scorer's own imports and data loading.
        starter = threading.Thread(target=start, daemon=True)
        starter.start()
        state.scorer(v)
        starter.join()
    if preforked is not None:
        preforked.stop()


def _job(req: Any) -> EvalJob | None:
    if not isinstance(req, dict) or req.get("op") != "evaluate":
        return None
    return EvalJob(env_id=str(req["env_id"]), source=str(req["source"]), mode=req.get("mode", "warm"))


def serve_stdio(slot: int, prewarm: list[str], backend: str = "modal") -> None:
    """Answer jobs read from stdin on stdout (protocol lines) until stdin closes.

    The protocol keeps the original stdout; fd 1 is pointed at stderr so that anything else
    printing in this process cannot corrupt the stream.
    """
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    state = WorkerState(slot)
    try:
        _prewarm(state, prewarm)
        out.write(stdio_wire.encode_line({"type": "ready"}))
        for line in sys.stdin.buffer:
            if not stdio_wire.is_protocol_line(line):
                continue
            try:
                job = _job(stdio_wire.decode_line(line))
            except wire.WireError:
                job = None
            if job is None:
                out.write(stdio_wire.encode_line({"type": "error", "message": "bad request"}))
                continue
            result = evaluate(job, state, backend=backend)
            out.write(stdio_wire.encode_line({"type": "result", "result": result.model_dump_json()}))
    finally:
        state.close()


def serve(sock_path: str, slot: int, prewarm: list[str], preforked: PreforkedZygote | None = None) -> None:
    """Accept one host connection and answer jobs until it closes.

    ``preforked``: a zygote ``container_boot`` forked before anything secret was loaded; used for
    the first prewarmed variant whose hardware and preload it matches, else stopped.
    """
    state = WorkerState(slot)
    _prewarm(state, prewarm, preforked)
    if os.path.exists(sock_path):
        os.unlink(sock_path)
    old = os.umask(0o177)  # the socket is root's alone: candidates (another uid) cannot connect
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(sock_path)
    os.umask(old)
    server.listen(1)
    conn, _ = server.accept()
    try:
        while True:
            try:
                req: Any = wire.recv_message(conn, as_torch=False)
            except EOFError:
                return
            job = _job(req)
            if job is None:
                wire.send_message(conn, {"type": "error", "message": "bad request"})
                continue
            result = evaluate(job, state, backend="docker")
            wire.send_message(conn, {"type": "result", "result": result.model_dump_json()})
    finally:
        state.close()
        conn.close()
        server.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="evobench-container")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", help="Unix socket to listen on (Docker backend)")
    where.add_argument("--stdio", action="store_true", help="protocol lines on stdin/stdout (Modal)")
    ap.add_argument("--slot", type=int, default=0)
    ap.add_argument("--prewarm", action="append", default=[])
    args = ap.parse_args(argv)
    if args.stdio:
        serve_stdio(args.slot, args.prewarm)
    else:
        serve(args.socket, args.slot, args.prewarm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
