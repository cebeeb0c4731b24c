"""Wall and CPU seconds of ``bench doctor`` (issue 36: <= 10 s wall on a 2-core machine).

The doctor runs its checks at once (threads; the sandbox smoke test and the torch probe are child
processes), so its wall time is about its longest check plus the CLI's start where cores are
free, and grows with the machine's load (printed). CPU is the whole process tree's
(:mod:`cpu_meter`), which load barely moves.

Run (under a minute):
  python benchmarks/bench_doctor.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_meter import CpuMeter  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    meter = CpuMeter()  # before any child starts: the whole tree is counted
    exe = Path(sys.executable).with_name("bench")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "evobench.cli.main"]
    print(
        f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; CPU clock: {meter.source}"
    )
    walls, cpus = [], []
    for _ in range(args.repeat):
        before, t0 = meter.seconds(), time.perf_counter()
        code = subprocess.run([*cmd, "doctor"], stdout=subprocess.DEVNULL, check=False).returncode
        walls.append(time.perf_counter() - t0)
        cpus.append(meter.seconds() - before)
        if code != 0:
            raise SystemExit(f"bench doctor exited {code}: run it to see which check fails")
    print(
        f"bench doctor: {statistics.median(walls):.2f} s wall (median of {args.repeat}; "
        f"{', '.join(f'{w:.2f}' for w in walls)}), {statistics.median(cpus):.2f} s CPU"
    )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
