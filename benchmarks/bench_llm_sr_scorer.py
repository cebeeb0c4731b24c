"""Time of one LLM-SR evaluation per variant, through the real local sandbox.

For every variant (the four released problems read from ``../shared/data/llm-sr``, copied into a
temporary data cache, plus the regenerated tiny variants; llm-sr-phys-osc1 is left out, its data
is gated) it evaluates the initial program (the linear skeleton) and, for the oscillators, the
true skeleton, ``REPEATS`` times after one warm-up, with ``LocalBackend(workers=1,
mode="warm")``. Printed per row: median wall time of one evaluation, its split into sandbox
setup / candidate time (equation calls during the fit plus the fresh prediction process) /
scorer's own compute, the number of equation calls the fit made, and the mean candidate time per
call.

Run: ``python benchmarks/bench_llm_sr_scorer.py [repeats]``
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
SHARED = REPO.parent / "shared" / "data" / "llm-sr"

OSC1_TRUE = """
import numpy as np


def equation(x, v, params):
    return (params[0] * np.sin(x) + params[1] * v**3 + params[2] * x**3 + params[3] * x * v
            + params[4] * x * np.cos(x))
"""

OSC2_TRUE = """
import numpy as np


def equation(t, x, v, params):
    return (
        params[0] * np.sin(t) + params[1] * v**3 + params[2] * x * v + params[3] * x * np.exp(params[4] * x)
    )
"""

PHYS_TRUE = """
import numpy as np


def equation(x, t, v, params):
    return (
        params[0] * x**3 + params[1] * x * np.exp(-np.abs(x)) + params[2] * np.sin(t) + params[3] * np.sin(v)
    )
"""

PROGRAMS = {
    "llm-sr-tiny": {"true": OSC1_TRUE},
    "llm-sr-phys-osc1-tiny": {"true": PHYS_TRUE},
    "llm-sr-osc1": {"true": OSC1_TRUE},
    "llm-sr-osc2": {"true": OSC2_TRUE},
    "llm-sr-bactgrow": {},
    "llm-sr-stressstrain": {},
}


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if not SHARED.is_dir():
        print(f"no data at {SHARED}", file=sys.stderr)
        return 2
    root = Path(tempfile.mkdtemp(prefix="bench-llm-sr-"))
    try:
        shutil.copytree(SHARED, root / "llm_sr" / "llm-sr")
        for p in (root / "llm_sr").rglob("*"):
            p.chmod(0o755 if p.is_dir() else 0o644)
        os.environ["EVOBENCH_DATA"] = str(root)
        from harness.envs.registry import default_registry
        from harness.evaluation.result import Status
        from harness.sandbox.local import LocalBackend

        reg = default_registry()
        print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}, repeats: {repeats}")
        header = (
            f"{'variant':<23}{'program':<9}{'log10 NMSE id':>14}{'total s':>9}{'setup s':>9}"
            f"{'cand. s':>9}{'scorer s':>9}{'calls':>7}{'ms/call':>9}"
        )
        print(header)
        with LocalBackend(workers=1, mode="warm") as backend:
            for vid, extra in PROGRAMS.items():
                v = reg.get(vid)
                for name, source in {"initial": v.initial_program, **extra}.items():
                    backend.evaluate(v, source)  # warm-up: scorer prepare, zygote start
                    rows = []
                    for _ in range(repeats):
                        t0 = time.perf_counter()
                        r = backend.evaluate(v, source)
                        wall = time.perf_counter() - t0
                        if r.status is not Status.OK:
                            print(f"{vid} {name}: {r.status.value}: {r.reason[:300]}")
                            break
                        rows.append((wall, r))
                    if not rows:
                        continue
                    wall = statistics.median(w for w, _ in rows)
                    r = rows[len(rows) // 2][1]
                    d = r.durations
                    calls = r.metrics["fit_calls"]
                    print(
                        f"{vid:<23}{name:<9}{r.score:>14.3f}{wall:>9.3f}{d.setup:>9.3f}{d.candidate:>9.3f}"
                        f"{d.score:>9.3f}{calls:>7.0f}{1000 * d.candidate / max(calls, 1):>9.2f}"
                    )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
