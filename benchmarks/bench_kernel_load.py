"""Kernel timing under machine load: honest spread and what a pure under-report gains.

Beside one busy process per core (a Python spin loop each, started here, killed at the end), runs
``--n`` evaluations of each tiny kernel variant's honest initial program and of the same program
reporting 0.1x its times (``tests/environments/hacks/<variant>/report_tenth_json.py``), the two
interleaved so that both see the same load. Prints per variant the honest figures and their CV
(target <= 10 %), and the under-report's gain over honest, median against median (target <= 1.2x;
an ``invalid`` under-report gains nothing). The load average is printed next to them.

Run: python benchmarks/bench_kernel_load.py [--n 5] [--variants trimul-tiny,...] [--no-load]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from harness.envs.registry import Variant, default_registry
from harness.evaluation.result import EvalResult, Status
from harness.sandbox.local import LocalBackend

ROOT = Path(__file__).resolve().parent.parent
HACKS = ROOT / "tests" / "environments" / "hacks"
VARIANTS = ("trimul-tiny", "mla-decode-tiny", "kernelbench-tiny")
BURN = "while True: pass"


def load() -> str:
    return "load {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def under_report(v: Variant) -> str:
    """The 0.1x under-report candidate of ``v`` (its hack file, on the initial program if it says so)."""
    text = (HACKS / v.id / "report_tenth_json.py").read_text(encoding="utf-8")
    return f"{v.initial_program}\n\n{text}" if "# base: initial-program" in text else text


def figure(r: EvalResult) -> float | None:
    """The score of an ``ok`` evaluation, else None (a failed under-report gains nothing)."""
    return r.score if r.status is Status.OK and r.score is not None else None


def gain(v: Variant, honest: float, cheat: float | None) -> float:
    """How much better the cheat scored than honest (1 = same; < 1 = worse)."""
    if cheat is None:
        return 0.0
    return cheat / honest if v.maximize else honest / cheat


def run(variant_ids: list[str], n: int) -> None:
    reg = default_registry()
    with LocalBackend(workers=1, mode="warm") as b:
        for vid in variant_ids:
            v = reg.get(vid)
            b.evaluate(v, v.initial_program)  # worker, zygote and scorer warm
            honest: list[float] = []
            failed: list[str] = []
            cheats: list[float | None] = []
            statuses: list[str] = []
            t0 = time.perf_counter()
            for _ in range(n):
                h = b.evaluate(v, v.initial_program)
                if (x := figure(h)) is None:
                    failed.append(f"{h.status.value}: {h.reason[:300]}")
                else:
                    honest.append(x)
                c = b.evaluate(v, under_report(v))
                cheats.append(figure(c))
                statuses.append(c.status.value)
            if not honest:
                print(f"[{vid}] every honest evaluation failed: {failed[0]}")
                continue
            mean = statistics.fmean(honest)
            cv = statistics.stdev(honest) / mean if len(honest) > 1 else 0.0
            ok = [c for c in cheats if c is not None]
            med_cheat = statistics.median(ok) if ok else None
            g = gain(v, statistics.median(honest), med_cheat)
            worst = max(gain(v, statistics.median(honest), c) for c in cheats)
            unit = "speedup" if v.maximize else "us"
            print(f"[{vid}] {load()}, {time.perf_counter() - t0:.0f} s")
            print(f"  honest {unit}: " + " ".join(f"{x:.3g}" for x in honest) + f"  CV {100 * cv:.1f} %")
            for f in failed:
                print(f"  honest evaluation not ok (left out of the CV): {f}")
            print(
                "  0.1x under-report: "
                + " ".join(f"{c:.3g}" if c is not None else s for c, s in zip(cheats, statuses, strict=True))
                + f"  gain (median vs median) {g:.2f}x, worst single {worst:.2f}x"
            )
            sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=5, help="evaluations of each program per variant")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--no-load", action="store_true", help="no busy processes beside the runs")
    a = ap.parse_args()
    cores = 0 if a.no_load else os.cpu_count() or 1
    burners = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(cores)]
    print(f"{cores} busy processes beside the evaluations; {load()}")
    try:
        run([x for x in a.variants.split(",") if x], a.n)
    finally:
        for p in burners:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
