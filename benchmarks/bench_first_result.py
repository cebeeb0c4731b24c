"""Seconds from ``bench run``'s process start to its first journaled evaluation (issue 36: <= 5 s).

Runs ``bench run --agent random-search --env eplb-tiny`` ``--repeat`` times in fresh result
directories and polls each run's ``candidates.jsonl`` for its first line (the first evaluation is
journaled the moment it is scored), then lets the run finish. Two cases:

* ``steady``: this installation's held-out key already has eplb-tiny's bounds (the usual case; one
  unmeasured run first makes sure of it);
* ``first-use``: a fresh data root (``EVOBENCH_DATA``), so a new key whose bounds the run measures
  first by scoring the initial program (once per key).

Wall seconds move with the machine's load (the load average is printed); the CPU seconds of the
whole run (the CLI, its workers and their sandboxes: :mod:`cpu_meter`) barely do.

Run (about a minute on a quiet 2-core machine):
  python benchmarks/bench_first_result.py [--repeat 3] [--evaluations 4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cpu_meter import CpuMeter  # noqa: E402

ENV, AGENT = "eplb-tiny", "random-search"


def _bench() -> list[str]:
    exe = Path(sys.executable).with_name("bench")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "evobench.cli.main"]


def one_run(root: Path, evaluations: int, env: dict[str, str]) -> tuple[float, float]:
    """Seconds to the first journaled evaluation and the whole run's wall seconds.

    Raises:
        RuntimeError: If the run ends without journaling an evaluation, or fails.
    """
    results = root / "results"
    cmd = [*_bench(), "run", "--agent", AGENT, "--env", ENV, "--max-evaluations", str(evaluations)]
    cmd += ["--results-dir", str(results), "--leaderboard-dir", str(root / "lb"), "--no-progress"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    first = None
    while first is None:
        journals = list(results.glob("*/candidates.jsonl"))
        if journals and journals[0].stat().st_size > 0:
            first = time.perf_counter() - t0
        elif proc.poll() is not None:
            _, err = proc.communicate()
            raise RuntimeError(f"run ended (exit {proc.returncode}) with no evaluation: {err[-2000:]!r}")
        else:
            time.sleep(0.01)
    _, err = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"run failed (exit {proc.returncode}): {err[-2000:]!r}")
    return first, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--evaluations", type=int, default=4, help="each run's --max-evaluations")
    ap.add_argument("--case", choices=("steady", "first-use", "both"), default="both")
    args = ap.parse_args()
    meter = CpuMeter()  # before any worker starts: the whole tree is counted
    print(
        f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; CPU clock: {meter.source}"
    )
    cases = ("steady", "first-use") if args.case == "both" else (args.case,)
    with tempfile.TemporaryDirectory(prefix="evobench-first-") as tmp:
        if "steady" in cases:  # the installation key's bounds measured (a no-op when they are)
            one_run(Path(tmp) / "prime", 1, dict(os.environ))
        for case in cases:
            firsts, walls, cpus = [], [], []
            for i in range(args.repeat):
                root = Path(tmp) / f"{case}-{i}"
                env = dict(os.environ)
                if case == "first-use":
                    (root / "data").mkdir(parents=True)
                    env["EVOBENCH_DATA"] = str(root / "data")
                before = meter.seconds()
                first, wall = one_run(root, args.evaluations, env)
                firsts.append(first)
                walls.append(wall)
                cpus.append(meter.seconds() - before)
            print(
                f"{case:<9} first result {statistics.median(firsts):5.2f} s wall (median of {args.repeat}; "
                f"{', '.join(f'{x:.2f}' for x in firsts)}); whole {args.evaluations}-evaluation run "
                f"{statistics.median(walls):5.2f} s wall, {statistics.median(cpus):5.2f} s CPU"
            )
    print(f"load average at end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
