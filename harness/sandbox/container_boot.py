"""Entry point of an evobench evaluation container: fork the candidate zygote, then serve.

``python -P -m harness.sandbox.container_boot --socket PATH --slot N [--prewarm ENV --zygote SPEC]``

With ``--zygote`` this process imports the variant's preload modules (numpy, torch) once and forks
the candidate zygote from that state (see ``prefork``) before it imports the registry, the scorer
or any data; then it runs ``container_main.serve`` with the forked zygote. A cold container thus
imports torch once instead of twice. Until the fork, only the standard library, numpy / torch and
the harness modules ``prefork`` needs are loaded here.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
"""Thread-count variables of the candidate environment, set before numpy / torch load."""


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    ap = argparse.ArgumentParser(prog="evobench-container")
    ap.add_argument("--socket", required=True)
    ap.add_argument("--slot", type=int, default=0)
    ap.add_argument("--prewarm", action="append", default=[])
    ap.add_argument("--zygote", default="", help="ZygoteSpec JSON: fork the zygote before serving")
    args = ap.parse_args(argv)
    preforked = None
    if args.zygote:
        from .isolation import UNPRIVILEGED_UID_BASE, candidate_env  # no numpy yet

        # Before numpy loads: OpenBLAS starts its thread pool on import, and a process with more
        # than one thread is not forked (prefork.fork_zygote checks).
        cpus = float(json.loads(args.zygote).get("hardware", {}).get("cpus", 1.0))
        threads = candidate_env(cpus)
        for var in THREAD_VARS:
            os.environ[var] = threads[var]
        from .prefork import PreforkedZygote, ZygoteSpec, fork_zygote

        child = fork_zygote(ZygoteSpec.from_json(args.zygote), UNPRIVILEGED_UID_BASE + args.slot)
        preforked = PreforkedZygote(child) if child is not None else None
    from .container_main import serve  # the registry, scorer and data: only after the fork

    serve(args.socket, args.slot, args.prewarm, preforked)
    return 0


if __name__ == "__main__":
    sys.exit(main())
