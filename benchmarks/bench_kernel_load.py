"""Kernel timing under machine load: honest spread and what a pure under-report gains.

Beside one busy process per core (a Python spin loop each, started here, killed at the end), runs
``--n`` evaluations of each tiny kernel variant's honest initial program and of the same program
reporting 0.1x its times (``tests/environments/hacks/<variant>/report_tenth_json.py``), the two
interleaved so that both see the same load. Prints per variant the honest figures and their CV
(target <= 10 %), and the under-report's gain over honest, median against median (target <= 1.2x;
an ``invalid`` under-report gains nothing), and the honest program's progress u (inside (0, 1):
neither floor nor target within the noise). The load average is printed next to them.

Each line also shows the same evaluations' figures before the trusted speed probe's scaling
(``os_raw_us`` / ``speedup_raw``: the OS clock as it counted before the probe), so both clocks
are compared under the very same load.

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
    own = HACKS / v.id / "report_tenth_json.py"
    text = (own if own.exists() else HACKS / "_shared" / "report_tenth_json.py").read_text(encoding="utf-8")
    return f"{v.initial_program}\n\n{text}" if "# base: initial-program" in text else text


def figure(r: EvalResult) -> float | None:
    """The score of an ``ok`` evaluation, else None (a failed under-report gains nothing)."""
    return r.score if r.status is Status.OK and r.score is not None else None


def raw(r: EvalResult) -> float | None:
    """The same evaluation's figure before the speed probe's scaling (None: not ok or no OS clock)."""
    x = r.metrics.get("speedup_raw", r.metrics.get("os_raw_us")) if r.status is Status.OK else None
    return x if x else None


def line(name: str, xs: list[float]) -> str:
    """``xs`` and their CV."""
    cv = statistics.stdev(xs) / statistics.fmean(xs) if len(xs) > 1 else 0.0
    return f"  {name}: " + " ".join(f"{x:.3g}" for x in xs) + f"  CV {100 * cv:.1f} %"


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
            raws: list[float] = []
            cheat_raws: list[float | None] = []
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
                    if (y := raw(h)) is not None:
                        raws.append(y)
                c = b.evaluate(v, under_report(v))
                cheats.append(figure(c))
                cheat_raws.append(raw(c))
                statuses.append(c.status.value)
            if not honest:
                print(f"[{vid}] every honest evaluation failed: {failed[0]}")
                continue
            ok = [c for c in cheats if c is not None]
            med_cheat = statistics.median(ok) if ok else None
            g = gain(v, statistics.median(honest), med_cheat)
            worst = max(gain(v, statistics.median(honest), c) for c in cheats)
            unit = "speedup" if v.maximize else "us"
            print(f"[{vid}] {load()}, {time.perf_counter() - t0:.0f} s")
            print(line(f"honest {unit}", honest))
            us = [v.progress.u(x) for x in honest]  # the unchanged program must stay inside (0, 1)
            print(f"  progress u of the honest program: {min(us):.3f}-{max(us):.3f} (floor "
                  f"{v.progress.y_floor:g}, target {v.progress.y_target:g})")  # fmt: skip
            if len(raws) == len(honest):
                print(line(f"honest {unit} before the probe's scaling", raws))
            for f in failed:
                print(f"  honest evaluation not ok (left out of the CV): {f}")
            print(
                "  0.1x under-report: "
                + " ".join(f"{c:.3g}" if c is not None else s for c, s in zip(cheats, statuses, strict=True))
                + f"  gain (median vs median) {g:.2f}x, worst single {worst:.2f}x"
            )
            ok_raw = [c for c in cheat_raws if c is not None]
            if len(raws) == len(honest) and ok_raw:
                g_raw = gain(v, statistics.median(raws), statistics.median(ok_raw))
                print(f"  0.1x gain before the probe's scaling (median vs median) {g_raw:.2f}x")
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
