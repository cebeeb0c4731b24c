"""Scorer CPU time of the AHC families for one evaluation's worth of outputs (150 cases).

For each family the 150 test cases of the full variant are loaded (the public inputs from
``../shared/data/ahc/<family>/inputs`` when present, else 150 generated cases), the initial
program is compiled with the host's g++ and run on every case *outside* the timed region, and
then only the trusted judging is timed (``Scorer.judge``: parsing, validity checks, scoring) with
``time.process_time``. AHC039 is also timed on a worst-case output: a valid 1000-vertex comb
polygon, the largest polygon the rules allow.

Run: ``python benchmarks/bench_ahc_scorer.py``
"""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from environments.ahc039.judge import MAX_VERTICES  # noqa: E402
from environments.ahc039.scorer import Ahc039Scorer  # noqa: E402
from environments.ahc058.scorer import Ahc058Scorer  # noqa: E402
from environments.ahc_common.batch import AhcScorer  # noqa: E402
from harness.envs.registry import default_registry  # noqa: E402

SHARED = REPO.parent / "shared" / "data" / "ahc"
CASES = 150
REPEATS = 5


def make_scorer(cls: type[AhcScorer], family: str, cache: Path) -> tuple[AhcScorer, str]:
    """The full variant's scorer, on the public inputs if available, else on generated cases."""
    variant = default_registry().get(family)
    inputs = SHARED / family / "inputs"
    if inputs.is_dir():
        folder = cache / family / "public_inputs_150"
        folder.mkdir(parents=True)
        for f in inputs.glob(f"{family}_*_input.txt"):
            shutil.copyfile(f, folder / f.name)
        source = "public inputs"
    else:
        params = {**variant.scorer_params, "public_cases": 0, "generated_cases": CASES}
        variant = dataclasses.replace(variant, scorer_params=params, data=())
        source = "generated inputs"
    scorer = cls(variant, cache / family)
    scorer.prepare()
    assert len(scorer.cases) == CASES
    return scorer, source


def initial_outputs(family: str, scorer: AhcScorer, work: Path) -> list[bytes]:
    """Outputs of the initial program on every case (compiled and run on the host, untimed)."""
    binary = work / f"{family}-initial"
    src = REPO / "environments" / family / "initial_program.cpp"
    subprocess.run(["g++", "-std=c++20", "-O2", "-o", str(binary), str(src)], check=True)
    return [
        subprocess.run([str(binary)], input=c.input, capture_output=True, check=True).stdout
        for c in scorer.cases
    ]


def comb_polygon() -> bytes:
    """A valid polygon with exactly 1000 vertices: a wide bar with 249 downward teeth."""
    teeth, top, bottom, depth = (MAX_VERTICES - 4) // 4, 60_000, 40_000, 150
    xs = [1_000 + 390 * k for k in range(teeth + 1)]
    verts = [(0, bottom), (99_000, bottom), (99_000, top)]
    for k in range(teeth, 0, -1):  # walk left along the top edge, cutting a notch per tooth
        right, left = xs[k], xs[k] - 200
        verts += [(right, top), (right, top - depth), (left, top - depth), (left, top)]
    verts.append((0, top))
    assert len(verts) == MAX_VERTICES
    return (f"{len(verts)}\n" + "".join(f"{x} {y}\n" for x, y in verts)).encode()


def cpu_time(fn: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(REPEATS):
        t0 = time.process_time()
        result = fn()
        best = min(best, time.process_time() - t0)
    return best, result


def report(label: str, scorer: AhcScorer, outputs: Sequence[bytes]) -> None:
    instances = [c.instance for c in scorer.cases]
    seconds, verdicts = cpu_time(lambda: scorer.judge(instances, outputs))
    scored = [v for v in verdicts if isinstance(v, int)]
    print(
        f"  {label:<34} {seconds:7.3f} s CPU per evaluation ({seconds / len(outputs) * 1e3:6.2f} ms/case), "
        f"{len(scored)}/{len(outputs)} valid, mean score {sum(scored) / max(1, len(scored)):.1f}"
    )


def main() -> int:
    if shutil.which("g++") is None:
        print("g++ is needed to produce the outputs", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="bench-ahc-") as tmp:
        work = Path(tmp)
        for family, cls in (("ahc039", Ahc039Scorer), ("ahc058", Ahc058Scorer)):
            scorer, source = make_scorer(cls, family, work / "cache")
            print(f"{family}: {CASES} cases from {source}; best of {REPEATS} runs")
            report("initial program's outputs", scorer, initial_outputs(family, scorer, work))
            if family == "ahc039":
                report("1000-vertex comb polygons", scorer, [comb_polygon()] * CASES)
    return 0


if __name__ == "__main__":
    sys.exit(main())
