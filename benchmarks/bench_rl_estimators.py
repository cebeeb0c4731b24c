"""SLOO k-1: O(N log N) sorted closed form vs the direct O(N^2) margin sum, N = 64 ... 4096.

For each N (k = 4 and k = N // 2) prints the max |difference| (must be <= 1e-12) and the
speed ratio direct / closed form (CPU time, best of several repeats).

Run: ``python benchmarks/bench_rl_estimators.py``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents.rl.estimators import sloo_minus_one, sloo_minus_one_direct  # noqa: E402


def best_cpu(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def main() -> int:
    rng = np.random.default_rng(0)
    ok = True
    print(f"{'N':>6} {'k':>5} {'max|diff|':>10} {'closed ms':>10} {'direct ms':>10} {'ratio':>8}")
    for n in (64, 256, 1024, 4096):
        # Progress-like rewards: failures (-1), ties and a continuous part on [0, 5].
        g = np.where(rng.random(n) < 0.2, -1.0, np.round(rng.uniform(0, 5, n), 2))
        for k in (4, n // 2):
            fast = sloo_minus_one(g, k)
            slow = sloo_minus_one_direct(g, k)
            diff = float(np.max(np.abs(fast - slow)))
            ok &= diff <= 1e-12
            reps = 20 if n <= 1024 else 3
            t_fast = best_cpu(lambda g=g, k=k: sloo_minus_one(g, k), reps)
            t_slow = best_cpu(lambda g=g, k=k: sloo_minus_one_direct(g, k), reps)
            ratio = t_slow / max(t_fast, 1e-9)
            print(f"{n:>6} {k:>5} {diff:>10.2e} {1e3 * t_fast:>10.3f} {1e3 * t_slow:>10.3f} {ratio:>8.1f}")
    print("agreement <= 1e-12:", "OK" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
