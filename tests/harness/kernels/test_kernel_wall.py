"""The expected wall time of GPU kernel evaluations (harness/kernels/wall.py) fits their timeouts."""

from __future__ import annotations

import pytest

from harness.envs.registry import Registry
from harness.kernels.checks import StopRule
from harness.kernels.wall import CallModel, CaseSize, WallPlan, benchmark_s, expected_wall_s, plan_of

_KERNEL_FAMILIES = ("trimul", "mla_decode", "kernelbench")


def _gpu_kernel_variants() -> list[str]:
    reg = Registry()
    return [v.id for f in _KERNEL_FAMILIES for v in reg.variants(f) if v.hardware.gpu_count > 0]


def _expected(variant_id: str) -> float:
    v = Registry().get(variant_id)
    if v.family == "kernelbench":
        from environments.kernelbench.scorer import expected_wall

        return expected_wall(v.scorer_params)
    if v.family == "trimul":
        from environments.trimul.scorer import wall_sizes
    else:
        from environments.mla_decode.scorer import wall_sizes
    tests, benchmarks = wall_sizes(v.scorer_params)
    return expected_wall_s(tests, benchmarks, CallModel(), plan_of(v.scorer_params))


def test_every_gpu_kernel_variant_is_listed() -> None:
    ids = _gpu_kernel_variants()
    assert {"trimul-h100", "trimul-a100", "mla-decode-h200", "kernelbench-batchnorm"} <= set(ids)
    assert len(ids) >= 19  # 2 TriMul, 1 MLA, 16 KernelBench


@pytest.mark.parametrize("variant_id", _gpu_kernel_variants())
def test_expected_wall_is_written_beside_the_timeout_and_fits_it(variant_id: str) -> None:
    """The manifest's ``expected_wall_s`` is the model's figure (to the second) and under ``timeout_s``."""
    v = Registry().get(variant_id)
    want = _expected(variant_id)
    assert v.scorer_params["expected_wall_s"] == pytest.approx(want, abs=1.0)
    assert want < v.timeout_s
    assert v.scorer_params["stop"]["max_wall_s"] == 120.0  # GPU MODE's cap per benchmark


def test_trimul_h100_without_the_cap_would_not_fit() -> None:
    """The cap is what makes it fit: the same model with no cap exceeds the timeout ~4x."""
    from environments.trimul.scorer import wall_sizes

    v = Registry().get("trimul-h100")
    tests, benchmarks = wall_sizes(v.scorer_params)
    plan = plan_of(v.scorer_params)
    uncapped = WallPlan(StopRule(**{**v.scorer_params["stop"], "max_wall_s": 0.0}), plan.warmup)
    assert expected_wall_s(tests, benchmarks, CallModel(), uncapped) > 3 * v.timeout_s


def test_a_benchmark_ends_one_request_past_its_cap_but_never_before_min_repeats() -> None:
    m = CallModel(fixed_s=1.0, wire_ns_per_byte=1.0, check_ns_per_byte=0.0)
    small, huge = CaseSize("s", 0, 0), CaseSize("h", 20_000_000_000, 20_000_000_000)
    plan = WallPlan(
        StopRule(min_repeats=3, max_repeats=100, max_wall_s=120.0), warmup=1, calibration_echoes=2
    )
    # 1 s calls, no echo cost: 100 requests + 10 extra = 111 s < the cap's 121 s
    assert benchmark_s(small, m, plan) == pytest.approx(1 + 110 * 1.0)
    # 41 s calls with 40 s echoes: warm-up + 2 echoes + 3 requests of 81 s = 364 s, then one more
    call, echo = 41.0, 40.0
    assert benchmark_s(huge, m, plan) == pytest.approx(call + 2 * echo + 3 * (call + echo) + (call + echo))
    assert m.call_s(10, 20) == pytest.approx(1.0 + 30e-9)
