"""Vectorised vs per-expert-loop EPLB simulator at the full problem size.

Config: L=58 layers, E=256 experts, R=288 slots, G=32 GPUs (g=8 groups, n=4 nodes). The plan is
the initial program's placement computed on a synthetic window; it is simulated on the next
synthetic window and on uniformly random loads. Prints both timings, the speed-up (target >= 50x)
and whether the two simulators agree.

Run: ``python benchmarks/bench_eplb_simulator.py``
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from environments.eplb.data import synthetic_windows  # noqa: E402
from environments.eplb.simulate import Balance, simulate, simulate_loop  # noqa: E402

L, E, R, GROUPS, NODES, G = 58, 256, 288, 8, 4, 32
TARGET_RATIO = 50.0


def load_initial_program() -> Callable[..., tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    path = REPO / "environments" / "eplb" / "initial_program.py"
    spec = importlib.util.spec_from_file_location("eplb_initial_program_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.rebalance_experts


def best_of(fn: Callable[[], Balance], repeats: int) -> tuple[float, Balance]:
    times = []
    result = fn()  # warm-up
    for _ in range(repeats):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def main() -> int:
    torch.set_num_threads(1)
    windows = synthetic_windows({"layers": L, "experts": E, "windows": 2, "seed": 1, "tokens": 1_000_000})
    t0 = time.perf_counter()
    _, log2phy, logcnt = load_initial_program()(windows[0].float(), R, GROUPS, NODES, G)
    plan_seconds = time.perf_counter() - t0
    gen = torch.Generator().manual_seed(0)
    workloads = {
        "next synthetic window": windows[1],
        "random loads": torch.randint(0, 10_000, (L, E), generator=gen),
    }
    print(
        f"EPLB simulator, L={L} E={E} R={R} G={G}; plan by the initial program in {plan_seconds * 1e3:.1f} ms"
    )
    ok = True
    for name, load in workloads.items():
        t_fast, fast = best_of(lambda load=load: simulate(log2phy, logcnt, load, R, G), repeats=20)
        t_loop, slow = best_of(lambda load=load: simulate_loop(log2phy, logcnt, load, R, G), repeats=3)
        ratio = t_loop / t_fast
        same_slots = torch.equal(fast.slot_load, slow.slot_load)
        d_exp, d_gpu = abs(fast.expert - slow.expert), abs(fast.gpu - slow.gpu)
        print(f"\n[{name}]")
        print(f"  vectorised : {t_fast * 1e3:9.3f} ms")
        print(f"  loop       : {t_loop * 1e3:9.3f} ms")
        verdict = "OK" if ratio >= TARGET_RATIO else "LOW"
        print(f"  speed-up   : {ratio:9.1f}x (target >= {TARGET_RATIO:.0f}x) {verdict}")
        print(f"  B_exp      : {fast.expert:.15f} vs {slow.expert:.15f} (|diff| {d_exp:.1e})")
        print(f"  B_gpu      : {fast.gpu:.15f} vs {slow.gpu:.15f} (|diff| {d_gpu:.1e})")
        print(f"  slot loads identical: {same_slots}")
        ok = ok and same_slots and d_exp <= 1e-12 and d_gpu <= 1e-12
    samples = [best_of(lambda: simulate(log2phy, logcnt, windows[1], R, G), repeats=5)[0] for _ in range(3)]
    print(f"\nvectorised simulate, median of best-of-5: {statistics.median(samples) * 1e3:.3f} ms")
    print("results agree" if ok else "RESULTS DIFFER")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
