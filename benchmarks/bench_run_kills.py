"""A long run killed again and again (``kill -9`` of bench, and of its process group), resumed each time.

Reports, per kill: journal rows, what was left once the kill settled (processes, scratch and
candidate directories, cgroups, semaphores) and the resident memory still held by the run's
processes; at the end: rows (journal, distinct evaluations, Parquet, leaderboard) and what all
the run's processes together left after the last resume. Targets: exact rows, nothing
evaluated twice, no surviving process after any kill, zero leftovers at the end.

Run: nice -n 15 python benchmarks/bench_run_kills.py [--n 1000] [--kills 5] [--env selftest-tiny]
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import sys
import tempfile
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _faults() -> types.ModuleType:
    """The kill / leftover helpers shared with the soak test (``tests/harness/runner/faults.py``)."""
    path = ROOT / "tests" / "harness" / "runner" / "faults.py"
    spec = importlib.util.spec_from_file_location("evobench_faults", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="evaluations of the run")
    ap.add_argument("--kills", type=int, default=5, help="kills of each kind (alternating)")
    ap.add_argument("--env", default="selftest-tiny")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the report here")
    args = ap.parse_args()
    faults = _faults()
    kinds = ["process", "group"] * args.kills
    with tempfile.TemporaryDirectory(prefix="evobench-soak-") as tmp:
        r = faults.soak(Path(tmp), args.env, args.n, kinds, workers=args.workers, timeout=1800)
    print(f"{args.n} evaluations, {args.env}, {args.workers} workers, {len(kinds)} kills: {r.seconds:.0f} s")
    print(f"{'#':>2} {'kind':8} {'rows':>5} {'procs':>5} {'dirs':>4} {'cgroups':>7} {'sems':>4}  orphan RSS")
    for i, k in enumerate(r.kills, 1):
        x = k.left
        print(
            f"{i:>2} {k.kind:8} {k.rows:>5} {x.processes:>5} {x.directories:>4} {x.cgroups:>7} "
            f"{x.semaphores:>4} {k.orphan_rss_kib / 1024:>7.1f} MiB"
        )
    f = r.final
    print(
        f"end: journal {r.rows}, distinct {r.distinct_seqs}, parquet {r.parquet_rows}, "
        f"leaderboard rows {r.leaderboard_rows}; left: {f.processes} processes, {f.directories} dirs, "
        f"{f.cgroups} cgroups, {f.semaphores} semaphores"
    )
    if args.json:
        args.json.write_text(json.dumps(dataclasses.asdict(r), default=str, indent=2) + "\n")


if __name__ == "__main__":
    main()
