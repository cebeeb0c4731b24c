"""Trusted-side rules: Cantor seeds, output comparison, stop rule, floored geomean."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from harness.evaluation.errors import CandidateInvalid
from harness.kernels.checks import StopRule, TensorOut, call_seed, cantor, compare, geomean_floored


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_cantor_is_the_pairing_function_and_injective(a: int, b: int) -> None:
    z = cantor(a, b)
    assert z == b + (a + b) * (a + b + 1) // 2
    # invert: w = floor((sqrt(8z+1)-1)/2), t = w(w+1)/2, b = z - t, a = w - b
    w = (math.isqrt(8 * z + 1) - 1) // 2
    bb = z - w * (w + 1) // 2
    assert (w - bb, bb) == (a, b)


def test_call_seeds_differ_per_call_and_per_secret() -> None:
    seeds = {call_seed(12345, 9371, k) for k in range(100)}
    assert len(seeds) == 100
    assert call_seed(1, 9371, 0) != call_seed(2, 9371, 0)


def _t(a: np.ndarray) -> TensorOut:
    return TensorOut(a, str(a.dtype))


def test_compare_accepts_within_tolerance_and_rejects_outside() -> None:
    want = _t(np.array([1.0, -2.0, 0.0], dtype=np.float32))
    compare("y", _t(np.array([1.019, -2.03, 0.019], dtype=np.float32)), want, 2e-2, 2e-2)
    with pytest.raises(CandidateInvalid, match="mismatch"):
        compare("y", _t(np.array([1.0, -2.0, 0.05], dtype=np.float32)), want, 2e-2, 2e-2)


def test_nan_fails_even_where_the_reference_is_nan() -> None:
    want = _t(np.array([np.nan, 1.0], dtype=np.float32))
    with pytest.raises(CandidateInvalid, match="finite"):
        compare("y", _t(np.array([np.nan, 1.0], dtype=np.float32)), want, 1.0, 1.0)
    with pytest.raises(CandidateInvalid, match="finite"):
        compare(
            "y", _t(np.array([np.inf, 1.0], dtype=np.float32)), _t(np.array([np.inf, 1.0], np.float32)), 1, 1
        )


def test_shape_dtype_and_non_tensor_outputs_fail() -> None:
    want = _t(np.zeros((2, 3), dtype=np.float32))
    with pytest.raises(CandidateInvalid, match="shape"):
        compare("y", _t(np.zeros((3, 2), dtype=np.float32)), want, 1, 1)
    with pytest.raises(CandidateInvalid, match="dtype"):
        compare("y", _t(np.zeros((2, 3), dtype=np.float64)), want, 1, 1)
    with pytest.raises(CandidateInvalid, match="not a tensor"):
        compare("y", [0.0], want, 1, 1)


def test_bfloat16_keeps_its_dtype_and_values() -> None:
    t = torch.tensor([1.5, -3.25, 1e-3], dtype=torch.bfloat16)
    out = TensorOut.of(t)
    assert out.dtype == "bfloat16"
    np.testing.assert_array_equal(out.array, t.float().numpy())


@given(st.lists(st.floats(1e-3, 1e3), min_size=3, max_size=60))
def test_stop_rule_bounds(times: list[float]) -> None:
    rule = StopRule(min_repeats=3, max_repeats=50, rel_err=0.01, max_seconds=1e9)
    assert not rule.done(times[:2])
    if len(times) >= 50:
        assert rule.done(times)


def test_stop_rule_stops_on_precision_and_on_budget() -> None:
    rule = StopRule(min_repeats=3, max_repeats=100, rel_err=0.01, max_seconds=10.0)
    assert rule.done([1.0, 1.0, 1.0])  # zero spread
    assert not rule.done([1.0, 2.0, 3.0])
    assert rule.done([4.0, 3.0, 5.0])  # 12 s > 10 s
    assert not StopRule(min_repeats=5).done([1.0] * 4)


@given(st.lists(st.floats(1e-9, 1e6), min_size=1, max_size=10), st.floats(1e-3, 10.0))
def test_geomean_floored_between_min_and_max(means: list[float], floor: float) -> None:
    g = geomean_floored(means, floor)
    fl = [max(m, floor) for m in means]
    assert min(fl) * (1 - 1e-9) <= g <= max(fl) * (1 + 1e-9)
    assert g >= floor * (1 - 1e-9)


def test_geomean_floor_stops_one_tiny_case_collapsing_the_score() -> None:
    assert geomean_floored([1000.0, 1e-30], 1.0) == pytest.approx(math.sqrt(1000.0))
    with pytest.raises(ValueError):
        geomean_floored([], 1.0)
    with pytest.raises(ValueError):
        geomean_floored([float("nan")], 1.0)


def _numpy_verdict(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> str:
    """The float64 NumPy check ``compare`` replaced (verbatim), as a verdict string."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    bad = ~np.isfinite(g)
    if bad.any():
        return f"rule 'finite': y has {int(bad.sum())} NaN or infinite values"
    err = np.abs(g - w)
    over = err > atol + rtol * np.abs(w)
    if not over.any():
        return "ok"
    i = np.unravel_index(int(np.argmax(np.where(over, err, -1.0))), g.shape)
    return (
        f"rule 'mismatch': y: {int(over.sum())} of {g.size} elements off "
        f"(worst at {tuple(int(x) for x in i)}: got {g[i]:.6g}, expected {w[i]:.6g}; "
        f"rtol={rtol}, atol={atol})"
    )


def _torch_verdict(got: np.ndarray, want: torch.Tensor, rtol: float, atol: float, dtype: str = "") -> str:
    try:
        compare("y", TensorOut(got, dtype or str(got.dtype)), want, rtol, atol)
    except CandidateInvalid as e:
        return str(e)
    return "ok"


@pytest.mark.parametrize("chunk", [7, 1 << 24])
@pytest.mark.parametrize("seed", range(6))
def test_device_compare_gives_the_numpy_verdict(
    monkeypatch: pytest.MonkeyPatch, chunk: int, seed: int
) -> None:
    """Same verdict and message as the host float64 check, across chunk boundaries and ties."""
    import harness.kernels.checks as checks

    monkeypatch.setattr(checks, "COMPARE_CHUNK", chunk)
    rng = np.random.default_rng(seed)
    want = rng.standard_cauchy((3, 5, 4)).astype(np.float32)
    got = (want + rng.normal(0, 0.02, want.shape)).astype(np.float32)
    if seed % 3 == 1:
        got.reshape(-1)[[3, 40, 41]] = want.reshape(-1)[[3, 40, 41]] + 5.0  # a tie for worst: the first wins
    if seed == 5:
        got.reshape(-1)[[0, 59]] = [np.nan, np.inf]
    for rtol, atol in ((2e-2, 2e-2), (1e-3, 1e-3)):
        assert _torch_verdict(got, torch.from_numpy(want), rtol, atol) == _numpy_verdict(
            got, want, rtol, atol
        )
    bf = torch.from_numpy(want).to(torch.bfloat16)  # a bfloat16 reference, widened exactly
    got_bf = bf.float().numpy() + np.float32(0.01)
    assert _torch_verdict(got_bf, bf, 1e-3, 1e-3, "bfloat16") == _numpy_verdict(
        got_bf, bf.float().numpy(), 1e-3, 1e-3
    )


@pytest.mark.gpu
def test_device_compare_on_the_gpu_gives_the_cpu_verdict() -> None:
    """The GPU twin: the reference on CUDA gives the verdict the CPU path gives."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    rng = np.random.default_rng(3)
    want = rng.standard_cauchy((64, 33)).astype(np.float32)
    got = (want + rng.normal(0, 0.05, want.shape)).astype(np.float32)
    for rtol, atol in ((2e-2, 2e-2), (1e-3, 1e-3)):
        cpu = _torch_verdict(got, torch.from_numpy(want), rtol, atol)
        assert _torch_verdict(got, torch.from_numpy(want).cuda(), rtol, atol) == cpu
        assert cpu == _numpy_verdict(got, want, rtol, atol)
