"""Docker backend overhead and throughput on eplb-tiny (needs a daemon and the built image).

- cold: wall time of one evaluation in a fresh container vs a bare
  `docker run --rm <same image> python3 -c 'import torch'` (target <= 1.3x);
- warm: harness overhead per evaluation in a long-lived container (target <= 50 ms), i.e. wall time
  minus time inside candidate calls and the scorer's own computation;
- throughput with 2 parallel containers vs 1;
- the local backend's warm overhead for comparison.

Run: python benchmarks/bench_docker_overhead.py [--n 20]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import time

from harness.envs.registry import default_registry
from harness.images.naming import env_image_tag
from harness.sandbox.docker_backend import DockerBackend
from harness.sandbox.local import LocalBackend


def bare_docker_run_s(image: str, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(
            ["docker", "run", "--rm", "--network", "none", image, "python3", "-c", "import torch"],
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def per_eval(backend: object, n: int) -> tuple[float, float]:
    v = default_registry().get("eplb-tiny")
    backend.evaluate(v, v.initial_program)  # type: ignore[attr-defined]
    walls, overheads = [], []
    for _ in range(n):
        t = time.perf_counter()
        r = backend.evaluate(v, v.initial_program)  # type: ignore[attr-defined]
        wall = time.perf_counter() - t
        assert r.status.value == "ok", r.reason
        walls.append(wall)
        overheads.append(wall - r.durations.candidate - r.durations.score)
    return statistics.median(walls), statistics.median(overheads)


def throughput(workers: int, n: int) -> float:
    v = default_registry().get("eplb-tiny")
    with DockerBackend(workers=workers, mode="warm", prewarm=(v.id,)) as b:
        b.evaluate_many(v, [v.initial_program] * workers * 2)
        t = time.perf_counter()
        res = b.evaluate_many(v, [v.initial_program] * n)
        dt = time.perf_counter() - t
    assert all(r.status.value == "ok" for r in res)
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    v = default_registry().get("eplb-tiny")
    image = env_image_tag(v)
    bare = bare_docker_run_s(image)
    with DockerBackend(workers=1, mode="cold") as b:
        cold_wall, _ = per_eval(b, max(3, args.n // 4))
    with DockerBackend(workers=1, mode="warm", prewarm=(v.id,)) as b:
        warm_wall, warm_over = per_eval(b, args.n)
    with LocalBackend(workers=1, mode="warm", prewarm=(v.id,)) as b:
        local_wall, local_over = per_eval(b, args.n)
    print(f"bare docker run + import torch : {bare * 1000:8.0f} ms")
    print(
        f"docker cold eval (wall)        : {cold_wall * 1000:8.0f} ms  ratio {cold_wall / bare:.2f}x  "
        f"target <= 1.3x: {'PASS' if cold_wall / bare <= 1.3 else 'MISS'}"
    )
    print(
        f"docker warm eval wall/overhead : {warm_wall * 1000:8.1f} / {warm_over * 1000:6.1f} ms  "
        f"target overhead <= 50 ms: {'PASS' if warm_over <= 0.05 else 'MISS'}"
    )
    print(f"local warm eval wall/overhead  : {local_wall * 1000:8.1f} / {local_over * 1000:6.1f} ms")
    t1, t2 = throughput(1, args.n * 2), throughput(2, args.n * 2)
    print(f"docker throughput 1 / 2 workers: {t1:8.1f} / {t2:8.1f} evals/s  ratio {t2 / t1:.2f}x")


if __name__ == "__main__":
    main()
