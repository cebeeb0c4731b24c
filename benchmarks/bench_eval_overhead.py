"""Per-evaluation harness overhead and parallel throughput of the local backend on eplb-tiny.

overhead = caller's wall time per evaluation - time inside candidate calls (trusted round trip)
           - the scorer's own computation
Reported for cold mode (fresh sandboxed interpreter per candidate) and warm mode (fork from a
zygote that pre-imported numpy and torch), next to a bare `python -c pass` spawn.
Targets: warm overhead <= 50 ms; 2 workers >= 1.8x the throughput of 1.

Run: python benchmarks/bench_eval_overhead.py [--n 30]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from harness.envs.registry import default_registry
from harness.sandbox.local import LocalBackend


def bare_spawn_ms(n: int = 20) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def overhead_ms(mode: str, n: int) -> tuple[float, float]:
    v = default_registry().get("eplb-tiny")
    with LocalBackend(workers=1, mode=mode, prewarm=(v.id,)) as b:  # type: ignore[arg-type]
        b.evaluate(v, v.initial_program)  # warm-up: worker start, scorer prepare
        over, total = [], []
        for _ in range(n):
            t = time.perf_counter()
            r = b.evaluate(v, v.initial_program)
            wall = time.perf_counter() - t
            assert r.status.value == "ok", r.reason
            over.append(wall - r.durations.candidate - r.durations.score)
            total.append(wall)
    return 1000 * statistics.median(over), 1000 * statistics.median(total)


def throughput(workers: int, n: int) -> float:
    v = default_registry().get("eplb-tiny")
    with LocalBackend(workers=workers, mode="warm", prewarm=(v.id,)) as b:
        b.evaluate_many(v, [v.initial_program] * workers * 2)  # warm every worker
        t = time.perf_counter()
        res = b.evaluate_many(v, [v.initial_program] * n)
        dt = time.perf_counter() - t
    assert all(r.status.value == "ok" for r in res)
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=30)
    args = ap.parse_args()
    bare = bare_spawn_ms()
    cold_o, cold_t = overhead_ms("cold", max(5, args.n // 3))
    warm_o, warm_t = overhead_ms("warm", args.n)
    print(f"bare `python -c pass` spawn        : {bare:8.1f} ms")
    print(f"cold overhead / total per eval: {cold_o:8.1f} ms / {cold_t:8.1f} ms ({cold_o / bare:.1f}x spawn)")
    print(
        f"warm overhead / total per eval: {warm_o:8.1f} ms / {warm_t:8.1f} ms ({warm_o / bare:.2f}x spawn)"
        f"  target <= 50 ms: {'PASS' if warm_o <= 50 else 'MISS'}"
    )
    t1 = throughput(1, args.n * 2)
    t2 = throughput(2, args.n * 2)
    print(
        f"throughput 1 worker / 2 workers    : {t1:8.1f} / {t2:8.1f} evals/s  ratio {t2 / t1:.2f}x"
        f"  target >= 1.8x: {'PASS' if t2 / t1 >= 1.8 else 'MISS'}"
    )


if __name__ == "__main__":
    main()
