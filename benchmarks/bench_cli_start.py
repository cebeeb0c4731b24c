"""CPU time to start a ``bench`` command that does little (help, listings), against a bare interpreter.

Every ``bench`` process pays the CLI's imports before it does anything; the listing commands,
``leaderboard`` and every ``--help`` should stay under 1 s of CPU (issue 36). Each command is run
``--repeat`` times as a subprocess; CPU is user + sys of the waited-for child (``getrusage``), so
load on the machine barely moves it (wall time is printed too, and does move).

Run (a minute):
  python benchmarks/bench_cli_start.py
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
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
"""The commands timed (a missing leaderboard directory: the command reads nothing but starts whole;
:func:`main` adds ``leaderboard`` of a real table of a dozen runs)."""


def _table(directory: Path) -> Path:
    """A leaderboard of 12 runs (2 identities of one agent, 2 of another, 3 seeds) in ``directory``."""
    import json

    from harness.envs.registry import default_registry
    from harness.results.leaderboard import append_leaderboard_row
    from harness.results.records import LeaderboardRow

    v = default_registry().get("eplb-tiny")
    for i in range(12):
        agent, budget = ("pacevolve", "random-search")[i // 6], (20, 50)[i // 3 % 2]
        row = LeaderboardRow(
            run_id=f"r{i}", family=v.family, variant=v.id, env_version=v.version, env_hash=v.hash,
            agent=agent, budget_json=json.dumps({"max_evaluations": budget}), seed=i % 3, best_score=0.5,
            progress=0.1, direction=v.direction, finished_at=f"2026-01-01T00:00:{i:02d}+00:00",
        )  # fmt: skip
        append_leaderboard_row(directory, row)
    return directory


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
    with tempfile.TemporaryDirectory() as tmp:
        real = ("leaderboard", "--env", "eplb-tiny", "--leaderboard-dir", str(_table(Path(tmp))))
        for argv in (*COMMANDS, real):
            cpu, wall = measure([*_bench(), *argv], args.repeat)
            label = "bench " + " ".join(argv[:2]) + (" (12 runs)" if argv is real else "")
            print(f"{label:<40} {cpu:6.2f} {cpu / max(base_cpu, 1e-3):7.1f} {wall:7.2f}")


if __name__ == "__main__":
    main()
