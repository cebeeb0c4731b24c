"""Time trimul's initial program as the harness does, on a reduced case list, for gpu-check.sh.

Usage: ``python3 -u scripts/gpu_check/trimul_probe.py [--variant trimul-h100] [--repeats 5]
[--timeout S]``. The variant's real scorer (``TriMulScorer``: trusted input generation, the
reference check, the sandboxed kernel driver, CUDA-event timing) scores the initial program in a
cold ``SandboxedCandidate`` exactly as a worker would, but on the smallest and largest test and
benchmark cases only, each benchmark stopping after ``--repeats`` timed calls. Every request's
trusted-side wall time (input generation, the sandbox round trip, the check) is logged as it
happens, then a per-call wall model ``a + b * elements`` fitted to them is extrapolated to the
variant's full case list and stop rule and compared with its ``timeout_s``.

Without a GPU (or with ``GPUCHECK_NO_GPU=1``) it runs ``trimul-tiny`` on the CPU the same way (a
plumbing check of this script) and exits 77. Exit 1: the evaluation failed or the estimate is
over the variant's timeout. The last line is ``KEY: ...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
import traceback
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

# case name -> phase -> list of (calls in the request, seconds)
LOG: dict[str, dict[str, list[tuple[int, float]]]] = defaultdict(lambda: defaultdict(list))


def _elements(spec: dict[str, Any]) -> int:
    return int(spec["bs"]) * int(spec["seqlen"]) ** 2 * int(spec["dim"])


def _pick(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The smallest and the largest case (by input elements), in that order."""
    ordered = sorted(cases, key=_elements)
    return [ordered[0]] if len(ordered) == 1 else [ordered[0], ordered[-1]]


def _instrument(task_cls: type, session_cls: type) -> None:
    """Log the trusted side's time per phase of every request (wrapping, not changing, the calls)."""

    def timed(cls: type, name: str, phase: str, case_of: Any, calls_of: Any) -> None:
        orig = getattr(cls, name)

        def wrapper(self: Any, *a: Any, **k: Any) -> Any:
            t = time.perf_counter()
            try:
                return orig(self, *a, **k)
            finally:
                dt = time.perf_counter() - t
                case, n = case_of(a), calls_of(a)
                LOG[case][phase].append((n, dt))
                print(f"  {phase:<6} {case:<48} calls={n:<3} {dt * 1e3:10.1f} ms", flush=True)

        setattr(cls, name, wrapper)

    timed(task_cls, "inputs", "inputs", lambda a: a[0].name, lambda a: 1)
    timed(task_cls, "check", "check", lambda a: a[0].name, lambda a: 1)
    # call_many(calls, "<test|warm-up|benchmark> <case name>", expects): keyed by the case name.
    timed(session_cls, "call_many", "call", lambda a: a[1].split(" ", 1)[-1], lambda a: len(a[0]))


def _per_call(case_name: str) -> float | None:
    """Mean trusted wall seconds per call of a case (input generation + round trip + check)."""
    phases = LOG.get(case_name)
    if not phases:
        return None
    calls = sum(n for ph, lst in phases.items() if ph.startswith("call") for n, _ in lst)
    if not calls:
        return None
    return sum(s for lst in phases.values() for _, s in lst) / calls


def _fit(points: list[tuple[int, float]]) -> tuple[float, float]:
    """Least-squares ``seconds = a + b * elements`` (b = 0 with one point)."""
    if len(points) == 1:
        return points[0][1], 0.0
    xs, ys = [float(p[0]) for p in points], [p[1] for p in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    var = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var if var else 0.0
    return max(0.0, my - b * mx), max(0.0, b)


def main() -> int:  # noqa: C901 - one linear report
    """Score the reduced variant, log the phases and print the extrapolation."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--variant", default="trimul-h100")
    ap.add_argument("--repeats", type=int, default=5, help="timed calls per benchmark (max_repeats)")
    ap.add_argument("--timeout", type=float, default=110.0, help="seconds this probe may take")
    args = ap.parse_args()
    t_start = time.monotonic()

    from harness.envs.data import family_data_dir
    from harness.envs.manifest import Language
    from harness.envs.registry import default_registry
    from harness.evaluation.errors import EvaluationOutcome
    from harness.kernels.session import KernelSession
    from harness.sandbox.runtime import SandboxedCandidate
    from harness.sandbox.worker import WorkerState

    gpu = os.environ.get("GPUCHECK_NO_GPU") != "1"
    if gpu:
        import torch

        gpu = torch.cuda.is_available()
    vid = args.variant if gpu else "trimul-tiny"
    full = default_registry().get(vid)
    params = dict(full.scorer_params)
    tests, benches = _pick(list(params["tests"])), _pick(list(params["benchmarks"]))
    full_stop = dict(params.get("stop", {}))
    params.update(tests=tests, benchmarks=benches, stop={**full_stop, "max_repeats": args.repeats})
    reduced = dataclasses.replace(full, scorer_params=params)
    print(f"variant {full.id} (timeout_s {full.timeout_s:.0f}); GPU here: {gpu}", flush=True)
    print(
        f"reduced: tests {[(t['seqlen'], t['bs'], t['dim']) for t in tests]}, benchmarks "
        f"{[(b['seqlen'], b['bs'], b['dim']) for b in benches]} (seqlen, bs, dim), "
        f"max_repeats {args.repeats}",
        flush=True,
    )

    state = WorkerState(0)  # binds worker slot 0's GPU and the scorer's threads, as a worker does
    scorer_cls = full.load_attr(full.scorer_ref)
    scorer = scorer_cls(reduced, family_data_dir(full.family))
    t = time.perf_counter()
    scorer.prepare()
    prepare_s = time.perf_counter() - t
    _instrument(type(scorer.task()), KernelSession)
    budget = args.timeout - (time.monotonic() - t_start) - 10  # leave time to report
    cand = SandboxedCandidate(
        full.initial_program,
        language=Language.PYTHON,
        filename="candidate.py",
        hw=full.hardware,
        deadline=time.monotonic() + budget,
        uid=state.uid,
        zygote=None,
        preload=full.preload,
        driver=full.sandbox_driver,
    )
    t = time.perf_counter()
    status, outcome = "ok", None
    try:
        outcome = scorer.score(cand)
    except EvaluationOutcome as e:
        status = f"{e.status.value}: {e.reason[-1500:]}"
    except Exception:  # noqa: BLE001 - report anything
        status = "scorer crashed: " + traceback.format_exc()[-1500:]
    finally:
        score_s = time.perf_counter() - t
        cand.close()
        for name, tail in (("stdout", cand.stdout_tail), ("stderr", cand.stderr_tail)):
            if tail:
                print(f"--- candidate {name} (tail) ---\n{tail.decode(errors='replace')[-3000:]}", flush=True)
    print(f"status: {status}", flush=True)
    print(
        f"scorer.prepare {prepare_s:.1f} s; score() {score_s:.1f} s; "
        f"sandbox setup {cand.setup_seconds:.1f} s",
        flush=True,
    )
    if outcome is not None:
        print(f"score_us {outcome.score:.1f}; metrics {dict(sorted(outcome.metrics.items()))}", flush=True)

    # Per-call wall by case size, from what was logged (a partial run still gives points).
    from harness.kernels.checks import StopRule

    names = {}
    for kind, cases in (("tests", tests), ("benchmarks", benches)):
        built = scorer_cls.cases(scorer)[0 if kind == "tests" else 1]
        for c, spec in zip(built, cases, strict=True):
            names[c.name] = spec
    points = []
    for name, spec in names.items():
        w = _per_call(name)
        if w is not None:
            points.append((_elements(spec), w))
            print(
                f"per-call wall {name}: {w * 1e3:.1f} ms ({_elements(spec) / 1e6:.1f} M input elements)",
                flush=True,
            )
    if not points:
        print(f"KEY: {full.id} {status[:120]}; no request finished", flush=True)
        return 1
    a, b = _fit(points)
    from harness.kernels.wall import CallModel, CaseSize, WallPlan, benchmark_s

    stop = StopRule(**full_stop)
    warmup = int(full.scorer_params.get("warmup", 1))
    est_tests = sum(a + b * _elements(s) for s in full.scorer_params["tests"])
    # The fitted model in harness/kernels/wall.py's terms (one "byte" per input element; an echo
    # counted at the call's per-element cost), bounded per benchmark by the stop rule's wall cap.
    model = CallModel(fixed_s=a, wire_ns_per_byte=b * 1e9, check_ns_per_byte=0.0)
    plan = WallPlan(stop, warmup=warmup)
    est_bench = sum(
        benchmark_s(CaseSize("b", _elements(s), 0), model, plan) for s in full.scorer_params["benchmarks"]
    )
    measured = sum(s for ph in LOG.values() for lst in ph.values() for _, s in lst)
    fixed = max(0.0, score_s - measured)  # inputs, round trips and checks are disjoint phases
    est = prepare_s + cand.setup_seconds + est_tests + est_bench
    print(f"model: per-call wall = {a * 1e3:.1f} ms + {b * 1e9:.2f} ns * elements", flush=True)
    print(
        f"estimate for the full {full.id}: tests {est_tests:.0f} s + benchmarks {est_bench:.0f} s "
        f"(warm-up {warmup}, then up to max_repeats {stop.max_repeats} or the "
        f"{stop.max_wall_s:.0f} s wall cap each; rel_err {stop.rel_err} may stop sooner) "
        f"+ setup {prepare_s + cand.setup_seconds:.0f} s = {est:.0f} s vs timeout_s {full.timeout_s:.0f} s "
        f"(unattributed time in the reduced run: {fixed:.0f} s, e.g. transport calibration)",
        flush=True,
    )
    big = max(points)
    key = (
        f"{full.id} {status.split(':')[0]}; largest case {big[0] / 1e6:.0f}M el: "
        f"{big[1] * 1e3:.0f} ms/call wall; "
        f"full eval est {est:.0f} s vs timeout {full.timeout_s:.0f} s"
    )
    if outcome is not None:
        key += f"; reduced score_us {outcome.score:.0f}"
    print("KEY: " + key, flush=True)
    if not gpu:
        return 77
    return 0 if status == "ok" and est < full.timeout_s else 1


if __name__ == "__main__":
    sys.exit(main())
