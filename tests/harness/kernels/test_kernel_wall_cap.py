"""GPU MODE's wall cap per benchmark and the ~quick reduced mode in the shared loop (run_cases)."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.kernels import evaluate
from harness.kernels.batch import BatchPlan
from harness.kernels.checks import StopRule
from harness.kernels.evaluate import Case, quick_rules, run_cases
from harness.kernels.timing import CallTiming, CaseBound


@dataclass
class _Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class _Session:
    """A session whose every request takes ``per_call`` seconds of the fake clock (GPU-like: no batching)."""

    clock: _Clock
    per_call: float
    params: Any = field(default_factory=lambda: type("P", (), {"device": "cuda"})())
    requests: list[str] = field(default_factory=list)

    def call_many(
        self, many: list[Any], what: str, expects: Any, timed: bool = True
    ) -> tuple[list[Any], CallTiming]:
        self.clock.now += self.per_call
        self.requests.append(what)
        t = 1e-3 * (1 + len(self.requests) % 2)  # noisy, far under the stop rule's 10 s of kernel time
        return [None] * len(many), CallTiming(t, t, self.per_call, 0.0, 0.0, 0.0, False, len(many))

    def close_case(self, times: list[float], more: Any, what: str) -> tuple[float, CaseBound]:
        return statistics.fmean(times), CaseBound(
            0.0, self.per_call, 0.0, statistics.median(times), len(times)
        )


class _Task:
    def inputs(self, case: Case, seed: int) -> Any:
        return seed

    def expected(self, case: Case, args: Any) -> list[Any]:
        return []

    def check(self, case: Case, args: Any, out: Any) -> None:
        return None


def _run(monkeypatch: pytest.MonkeyPatch, per_call: float, stop: StopRule, plan: BatchPlan) -> _Session:
    clock = _Clock()
    monkeypatch.setattr(evaluate.time, "perf_counter", clock)
    s = _Session(clock, per_call)
    run_cases(s, _Task(), [Case("t", 1)], [Case("a", 2), Case("b", 3)], stop, plan=plan, secret=5)  # type: ignore[arg-type]
    return s


def test_each_benchmark_stops_at_its_wall_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    """9 s requests, 120 s cap: warm-up + 13 timed requests (117 s), the 14th ends past the cap."""
    stop = StopRule(min_repeats=3, max_repeats=100, rel_err=1e-9, max_seconds=10.0, max_wall_s=120.0)
    s = _run(monkeypatch, 9.0, stop, BatchPlan())
    assert s.requests.count("test t") == 1
    timed = [r for r in s.requests if r.startswith("benchmark")]
    assert timed.count("benchmark a") == timed.count("benchmark b") == 13  # 9 + 13 * 9 = 126 s > 120
    # without the cap the kernel-time rule (10 s of 1 ms calls) runs to max_repeats
    s = _run(monkeypatch, 9.0, StopRule(min_repeats=3, max_repeats=100, rel_err=1e-9), BatchPlan())
    assert s.requests.count("benchmark a") == 100


def test_the_cap_never_cuts_below_min_repeats(monkeypatch: pytest.MonkeyPatch) -> None:
    stop = StopRule(min_repeats=3, max_repeats=100, rel_err=1e-9, max_wall_s=120.0)
    s = _run(monkeypatch, 200.0, stop, BatchPlan())
    assert s.requests.count("benchmark a") == 3


def test_quick_mode_makes_exactly_n_timed_requests(monkeypatch: pytest.MonkeyPatch) -> None:
    stop, plan = quick_rules(StopRule(max_wall_s=120.0), BatchPlan(), 3)
    assert stop.max_wall_s == 120.0
    s = _run(monkeypatch, 0.01, stop, plan)
    assert s.requests == ["test t", "warm-up a", *["benchmark a"] * 3, "warm-up b", *["benchmark b"] * 3]
    with pytest.raises(ValueError):
        quick_rules(StopRule(), BatchPlan(), 0)


def test_round_trip_requests_get_an_echo_only_where_the_bound_can_bind() -> None:
    """No OS clock (GPU): an echo only for a round trip above 1.1 x the fastest echo + 100 us."""
    from types import SimpleNamespace

    from harness.kernels.calibrate import Overhead
    from harness.kernels.session import DriverParams, KernelSession

    s = KernelSession(SimpleNamespace(), DriverParams(entry="f", device="cuda"))
    oh = Overhead(hi=6.5, lo=6.0, samples=2)  # a 3 GB request: 6 s of transfer
    assert not s._needs_echo(6.0 * 1.1 + 100e-6, oh)  # a kernel inside the transport's slack
    assert s._needs_echo(6.0 * 1.1 + 0.01, oh)
    s._cpu = object()  # type: ignore[assignment]  # the OS clock subtracts every echo's CPU
    assert s._needs_echo(0.0, oh)


def test_calibration_stops_at_its_budget() -> None:
    """A trusted echo (CPU) with no budget left after one echo: first touch + 1, not + 7."""
    import torch

    from harness.kernels.batch import pack
    from harness.kernels.calibrate import EchoCalibrator

    request, arrays = pack([[torch.ones(8)]], torch)
    request["expect"] = [["float32", [8]]]
    params = {"entry": "f", "device": "cpu", "threads": 1, "mutable": [], "l2_flush_bytes": 0}
    with EchoCalibrator(params, reps=7, budget_s=0.0) as echo:
        assert echo.overhead(request, arrays).samples == 1
        assert echo.overhead(request, arrays, more=1).samples == 2  # a pair echo is never cut
    with EchoCalibrator(params, reps=7) as echo:
        assert echo.overhead(request, arrays).samples == 7
