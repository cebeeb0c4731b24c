"""Entry point of the candidate side, run INSIDE the sandbox (untrusted territory).

Modes:
  ``serve FD``   load one candidate program and answer calls over the socket FD (:mod:`.serve`);
  ``zygote FD``  pre-import heavy modules once, then fork a fresh child per candidate
                 (each child runs ``serve`` on a new socket passed back with SCM_RIGHTS),
                 and after each candidate kill every other process and wipe scratch space
                 (:mod:`.zygote`, :mod:`.scrub`).

Started as ``python -I -B -m harness.inside.shim`` (``harness/sandbox/launch.py``). The package
imports only the standard library, numpy (and torch lazily) and itself, and installs the seccomp
filter of :mod:`.syscall_filter` before any candidate code runs; nothing here is secret, the
candidate may read it.
"""

from __future__ import annotations

import importlib
import socket
import sys

from . import syscall_filter
from .serve import limit_data, serve
from .zygote import zygote


def main() -> None:
    """Entry point: ``shim serve FD [PRELOAD [DATA]]`` or ``zygote FD PRELOAD SCRATCH REAP``.

    PRELOAD and SCRATCH are comma-separated lists (may be empty); REAP is ``all`` or ``group``;
    DATA is the ``RLIMIT_DATA`` headroom in bytes applied after the pre-imports (0: none).
    """
    mode, fd = sys.argv[1], int(sys.argv[2])
    sock = socket.socket(fileno=fd)
    if mode == "serve":
        syscall_filter.install()
        for name in sys.argv[3].split(",") if len(sys.argv) > 3 else []:
            if name:
                importlib.import_module(name)
        limit_data(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
        serve(sock)
    elif mode == "zygote":
        preload, scratch, reap = sys.argv[3], sys.argv[4], sys.argv[5]
        zygote(sock, [m for m in preload.split(",") if m], [d for d in scratch.split(",") if d], reap)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
