"""CPU time to start a ``bench`` command that does little (help, listings), against a bare interpreter.

Every ``bench`` process pays the CLI's imports before it does anything; the listing commands and
every ``--help`` should stay under 1 s of CPU (issue 36). Each command is run ``--repeat`` times as
a subprocess; CPU is user + sys of the waited-for child (``getrusage``), so load on the machine
barely moves it (wall time is printed too, and does move).

Run (a minute):
  python benchmarks/bench_cli_start.py
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

COMMANDS: tuple[tuple[str, ...], ...] = (
    ("--help",),
    ("run", "--help"),
    ("compare", "--help"),
    ("envs",),
    ("agents",),
    ("leaderboard", "--env", "eplb-tiny", "--leaderboard-dir", "/nonexistent-evobench-bench"),
)
"""The commands timed (a missing leaderboard directory: the command reads nothing but starts whole)."""


def _bench() -> list[str]:
    exe = Path(sys.executable).with_name("bench")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "evobench.cli.main"]


def measure(cmd: list[str], repeat: int) -> tuple[float, float]:
    """Median CPU seconds and median wall seconds of ``cmd`` over ``repeat`` runs."""
    cpus, walls = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return statistics.median(cpus), statistics.median(walls)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    base_cpu, base_wall = measure([sys.executable, "-c", "pass"], args.repeat)
    print(f"bare interpreter: {base_cpu:.2f} s CPU, {base_wall:.2f} s wall (median of {args.repeat})")
    print(f"{'command':<40} {'CPU s':>6} {'x bare':>7} {'wall s':>7}")
    for argv in COMMANDS:
        cpu, wall = measure([*_bench(), *argv], args.repeat)
        label = "bench " + " ".join(argv[:2])
        print(f"{label:<40} {cpu:6.2f} {cpu / max(base_cpu, 1e-3):7.1f} {wall:7.2f}")


if __name__ == "__main__":
    main()
