"""Per-step cost of KuaiRec's trusted training (issue 30): the state out, the gradients back.

The scorer's :class:`environments.kuairec.trainer.TrustedTrainer` (real socket, real decoding,
real AdamW) talks to a stand-in driver process that uses ``inside/driver.py``'s own wire and
copy-in code but computes no loss (its gradients are zeros of the parameters' shapes), so what is
timed is the transport and the trusted step alone. Synthetic tensors of the initial program's
parameter shapes, at the tiny and at the full variant's sizes (the full variant's data need not be
on the machine).

    .venv/bin/python benchmarks/bench_kuairec_transport.py [--device cuda] [--steps 60]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from environments.kuairec.trainer import Limits, TrustedTrainer  # noqa: E402
from harness.scoring.api import ExecResult  # noqa: E402

DRIVER = REPO / "environments" / "kuairec" / "inside" / "driver.py"
# variant: (items incl. padding, embedding_dim, max_seq_len, batch, negatives, steps per evaluation)
VARIANTS = {
    "kuairec-tiny": (401, 16, 50, 64, 32, 2 * math.ceil(300 * 16 / 64)),
    # About 7.2k users and 10.7k items after the 5-core filter; 16 epochs of 32 cuts per user.
    "kuairec": (10_729, 128, 1024, 128, 128, 16 * math.ceil(7_200 * 32 / 128)),
}


def shapes(items: int, d: int, max_len: int) -> list[tuple[str, list[int]]]:
    """The initial program's parameters."""
    return [("items.weight", [items, d]), ("log_decay", []), ("mlp.0.bias", [2 * d]),
            ("mlp.0.weight", [2 * d, d]), ("mlp.3.bias", [d]), ("mlp.3.weight", [d, 2 * d]),
            ("norm.bias", [d]), ("norm.weight", [d]), ("positions.weight", [max_len, d])]  # fmt: skip


def child(sock_dir: str, spec: str, device: str) -> None:
    """The stand-in driver: the real wire and copy-in, zero gradients."""
    import torch

    loaded = importlib.util.spec_from_file_location("kuairec_driver", DRIVER)
    assert loaded is not None and loaded.loader is not None
    drv = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(drv)
    params = [torch.zeros(s, device=device) for _, s in json.loads(spec)]
    sock = drv._connect(sock_dir)
    tensors = [{"name": n, "kind": "param"} for n, _ in json.loads(spec)]
    drv._send(sock, {"type": "ready", "tensors": tensors, "hyperparameters": {}},
              [drv._to_wire(t, torch) for t in params])  # fmt: skip
    while True:
        header, arrays = drv._recv(sock)
        if header.get("op") != "step":
            break
        with torch.no_grad():
            for t, (d, a) in zip(params, arrays[: len(params)], strict=True):
                t.copy_(drv._from_wire(d, a, torch, device))
        grads = [drv._to_wire(torch.zeros_like(t), torch) for t in params]
        if device == "cuda":
            torch.cuda.synchronize()
        drv._send(sock, {"type": "grads", "missing": []}, grads)


class LocalRuntime:
    """Runs the stand-in driver as a plain subprocess (no sandbox: transport only)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir

    def remaining(self) -> float:
        return 600.0

    def run(self, argv: list[str], stdin: bytes = b"", *, timeout: float, **_: object) -> ExecResult:
        t0 = time.perf_counter()
        p = subprocess.run(argv[:-1] + [str(self.workdir / argv[-1])], capture_output=True, timeout=timeout)
        return ExecResult(p.returncode, p.stdout, p.stderr, time.perf_counter() - t0, 0.0)


def measure(variant: str, device: str, steps: int) -> dict[str, float]:
    items, d, max_len, batch, negatives, per_eval = VARIANTS[variant]
    spec = shapes(items, d, max_len)
    state = sum(4 * math.prod(s) for _, s in spec)
    limits = Limits(1, items, 1 << 30, 1 << 30, 256 << 20, 1e-3, 0.0, {"lr": [1e-5, 1e-2]})
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, __file__, "--child", json.dumps(spec), "--device", device, "--sock-dir"]
        rng = np.random.default_rng(0)
        u = rng.integers(0, 1000, batch)
        c = rng.integers(1, 10, batch)
        neg = rng.integers(1, items, (batch, negatives))
        times = []
        with TrustedTrainer(LocalRuntime(Path(tmp)), argv, b"", limits) as tr:  # type: ignore[arg-type]
            for i in range(steps + 5):
                t0 = time.perf_counter()
                tr.step(i + 1, i, u, c, neg)
                if i >= 5:
                    times.append(time.perf_counter() - t0)
            tr.finish()
    ms = 1e3 * statistics.median(times)
    return {"state_mb": state / 2**20, "step_ms": ms, "per_eval_s": ms * per_eval / 1e3, "steps": per_eval}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--child")
    ap.add_argument("--sock-dir")
    a = ap.parse_args()
    if a.child:
        child(a.sock_dir, a.child, a.device)
        return
    rows = {v: measure(v, a.device, a.steps) for v in VARIANTS}
    for v, r in rows.items():
        print(f"{v:14s} state {r['state_mb']:7.2f} MB each way  median step {r['step_ms']:8.2f} ms  "
              f"x {r['steps']} steps = {r['per_eval_s']:7.1f} s per evaluation")  # fmt: skip
    full, tiny = rows["kuairec"], rows["kuairec-tiny"]
    print(
        f"ratio full/tiny per step: {full['step_ms'] / tiny['step_ms']:.1f}x; "
        f"full variant's transport: {full['per_eval_s'] / 1200:.1%} of its 1,200 s budget"
    )


if __name__ == "__main__":
    main()
