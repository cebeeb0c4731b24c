"""Multi-Evolve scorer cost per evaluation, without the sandbox.

Two workloads:

* ``tiny``: the multi-evolve-tiny variant exactly (two synthetic landscapes, 58 training and 200
  test mutants each).
* ``lite-sized``: five synthetic assays roughly the size of real DMS tables (60 sites with 3
  substitutions each: 181 train singles/WT, ~5,300 doubles at 30 %; 8,000 test mutants each),
  loaded from CSV files through the real data path.

For each it prints the one-off ``prepare`` time (generating / parsing and splitting), then per
evaluation the scorer's own time (building the arguments, validating, Pearson r and top-5 %
precision; the candidate call is a constant-time stub), and for reference the initial program's
fit time in-process (no sandbox).

Run: ``python benchmarks/bench_multi_evolve_scorer.py``
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from environments.multi_evolve.data import write_synthetic_csv  # noqa: E402
from environments.multi_evolve.scorer import MultiEvolveScorer  # noqa: E402
from harness.envs.registry import default_registry  # noqa: E402
from harness.scoring.api import CallResult  # noqa: E402

LITE_SIZED = {
    "sites": 60,
    "alternatives": 3,
    "length": 240,
    "double_fraction": 0.3,
    "test_size": 8000,
    "pair_fraction": 0.05,
}


class StubRuntime:
    """Returns precomputed predictions instantly, so only the scorer's work is timed."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.candidate_seconds = 0.0

    def call_driver(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        t0 = time.perf_counter()
        value = self.fn(*args)
        self.candidate_seconds += time.perf_counter() - t0
        return CallResult(value=value, seconds=0.0)

    def transport_seconds(self, *args: Any, repeats: int = 5) -> float:
        return 0.0


def load_initial() -> Callable[..., Any]:
    path = REPO / "environments" / "multi_evolve" / "initial_program.py"
    spec = importlib.util.spec_from_file_location("multi_evolve_initial_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    driver = importlib.util.module_from_spec(
        importlib.util.spec_from_file_location(
            "multi_evolve_driver_bench", path.parent / "inside" / "driver.py"
        )  # type: ignore[arg-type]
    )
    driver.__spec__.loader.exec_module(driver)  # type: ignore[union-attr]
    return lambda train, test, context: driver.predict(module, train, test, context)


def time_scorer(label: str, scorer: MultiEvolveScorer, repeats: int) -> None:
    t0 = time.perf_counter()
    scorer.prepare()
    prepare = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    canned = [rng.normal(size=a.truth.size) for a in scorer.assays]
    it: list[int] = [0]

    def stub(train: Any, test: Any, context: Any) -> np.ndarray:
        out = canned[it[0] % len(canned)]
        it[0] += 1
        return out

    per_eval = []
    for _ in range(repeats):
        rt = StubRuntime(stub)
        t0 = time.perf_counter()
        scorer.score(rt)  # type: ignore[arg-type]
        per_eval.append(time.perf_counter() - t0 - rt.candidate_seconds)
    entry = load_initial()
    rt = StubRuntime(entry)
    t0 = time.perf_counter()
    out = scorer.score(rt)  # type: ignore[arg-type]
    total = time.perf_counter() - t0
    n_train = sum(len(a.train["mutant"]) for a in scorer.assays)
    n_test = sum(a.truth.size for a in scorer.assays)
    print(
        f"{label}: {len(scorer.assays)} assays, {n_train} train / {n_test} test rows\n"
        f"  prepare (once per worker)     {prepare * 1e3:9.2f} ms\n"
        f"  scorer time per evaluation    {statistics.median(per_eval) * 1e3:9.2f} ms "
        f"(median of {repeats}, min {min(per_eval) * 1e3:.2f} ms)\n"
        f"  initial program fit, no sandbox {rt.candidate_seconds * 1e3:7.1f} ms; "
        f"whole in-process evaluation {total * 1e3:.1f} ms; combined {out.score:.4f} "
        f"(r {out.metrics['pearson_r']:.3f}, precision {out.metrics['precision_top5']:.3f})"
    )


def main() -> int:
    tiny = default_registry().get("multi-evolve-tiny")
    time_scorer("multi-evolve-tiny", MultiEvolveScorer(tiny, Path("/nonexistent")), repeats=50)

    lite = default_registry().get("multi-evolve-lite")
    with tempfile.TemporaryDirectory(prefix="me-bench-") as d:
        for i, (_, src) in enumerate(lite.data):
            write_synthetic_csv(Path(d) / src.filename, {**LITE_SIZED, "seed": 100 + i})
        time_scorer("lite-sized synthetic (CSV path)", MultiEvolveScorer(lite, Path(d)), repeats=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
