"""``python -m harness.doctor.eval_one ID``: one evaluation of a variant's initial program.

The doctor's ``evals`` row runs this in its own process group under a hard cap, so an evaluation
that runs past it is killed (its worker with it; bubblewrap's ``--die-with-parent`` takes the
sandboxes). Prints one line ``RESULT {"status": ..., "reason": ...}``.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str] | None = None) -> int:
    """Evaluate the initial program of the variant named by the one argument (local, cold).

    Returns:
        0 when a result was printed (whatever its status), 2 on a usage error.
    """
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m harness.doctor.eval_one VARIANT_ID", file=sys.stderr)
        return 2
    from harness.envs.registry import default_registry
    from harness.sandbox.local import LocalBackend

    v = default_registry().get(args[0])
    backend = LocalBackend(workers=1, mode="cold")
    try:
        r = backend.evaluate(v, v.initial_program)
    finally:
        backend.close()
    print("RESULT " + json.dumps({"status": r.status.value, "reason": r.reason[-400:]}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
