"""The trusted evaluation server inside an evobench container image.

Started by the Docker backend as ``python -m harness.sandbox.container_main --socket PATH --slot N``.
It listens on a Unix socket in a host-mounted directory (the container has no network), accepts
one connection from the host and answers evaluation jobs with ``EvalResult`` JSON, using the same
``worker.evaluate`` as the local backend. Candidates run as a separate unprivileged uid (see
``isolation.detect_isolation``: level ``container``).
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
from typing import Any

from . import wire
from .prefork import PreforkedZygote
from .worker import EvalJob, WorkerState, evaluate


def serve(sock_path: str, slot: int, prewarm: list[str], preforked: PreforkedZygote | None = None) -> None:
    """Accept one host connection and answer jobs until it closes.

    ``preforked``: a zygote ``container_boot`` forked before anything secret was loaded; used for
    the first prewarmed variant whose hardware and preload it matches, else stopped.
    """
    state = WorkerState(slot)
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
            if not isinstance(req, dict) or req.get("op") != "evaluate":
                wire.send_message(conn, {"type": "error", "message": "bad request"})
                continue
            job = EvalJob(env_id=str(req["env_id"]), source=str(req["source"]), mode=req.get("mode", "warm"))
            result = evaluate(job, state, backend="docker")
            wire.send_message(conn, {"type": "result", "result": result.model_dump_json()})
    finally:
        state.close()
        conn.close()
        server.close()


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="evobench-container")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--slot", type=int, default=0)
    ap.add_argument("--prewarm", action="append", default=[])
    args = ap.parse_args(argv)
    serve(args.socket, args.slot, args.prewarm)
    return 0


if __name__ == "__main__":
    sys.exit(main())
