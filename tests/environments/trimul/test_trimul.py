"""TriMul: reference against explicit loops, masks, seeded inputs, cases, scoring in the sandbox."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from environments.trimul.reference import TriMulCase, generate, trimul
from environments.trimul.scorer import TriMulScorer
from harness.envs.registry import default_registry
from harness.evaluation.errors import InfraError
from harness.evaluation.result import Status
from harness.sandbox.local import LocalBackend
from harness.scoring.device import OVERRIDE_ENV


def _case(**kw: object) -> TriMulCase:
    base = {
        "seqlen": 5,
        "bs": 2,
        "dim": 6,
        "hiddendim": 4,
        "seed": 7,
        "nomask": False,
        "distribution": "normal",
    }
    base.update(kw)
    return TriMulCase(**base)  # type: ignore[arg-type]


def _loops(x: np.ndarray, mask: np.ndarray, w: dict[str, np.ndarray]) -> np.ndarray:
    """The maths with explicit sums (float64), independent of the torch reference."""

    def ln(v: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = v.mean(-1, keepdims=True)
        var = ((v - mu) ** 2).mean(-1, keepdims=True)
        return (v - mu) / np.sqrt(var + 1e-5) * g + b

    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    B, N, _, _ = x.shape
    H = w["left_proj.weight"].shape[0]
    xn = ln(x, w["norm.weight"], w["norm.bias"])
    m = mask[..., None]
    left = (xn @ w["left_proj.weight"].T) * m * sig(xn @ w["left_gate.weight"].T)
    right = (xn @ w["right_proj.weight"].T) * m * sig(xn @ w["right_gate.weight"].T)
    o = np.zeros((B, N, N, H))
    for b in range(B):
        for i in range(N):
            for j in range(N):
                for k in range(N):
                    o[b, i, j] += left[b, i, k] * right[b, j, k]
    o = ln(o, w["to_out_norm.weight"], w["to_out_norm.bias"])
    return (o * sig(xn @ w["out_gate.weight"].T)) @ w["to_out.weight"].T


@pytest.mark.parametrize("nomask", [True, False])
@pytest.mark.parametrize("dist", ["normal", "cauchy"])
def test_reference_matches_explicit_sums(nomask: bool, dist: str) -> None:
    x, mask, w, config = generate(_case(nomask=nomask, distribution=dist), 11, "cpu")
    assert config == {"dim": 6, "hidden_dim": 4} and x.dtype == torch.float32
    want = _loops(x.double().numpy(), mask.double().numpy(), {k: v.double().numpy() for k, v in w.items()})
    np.testing.assert_allclose(trimul(x, mask, w).numpy(), want, rtol=1e-4, atol=1e-4)


def test_masked_cases_have_a_real_mask_that_changes_the_output() -> None:
    x, mask, w, _ = generate(_case(seqlen=8, nomask=False), 3, "cpu")
    assert mask.dtype == torch.int64 and 0 < int(mask.sum()) < mask.numel()
    assert not torch.allclose(trimul(x, mask, w), trimul(x, torch.ones_like(mask), w), rtol=2e-2, atol=2e-2)
    _, ones, _, _ = generate(_case(nomask=True), 3, "cpu")
    assert ones.dtype == torch.float32 and bool((ones == 1).all())


def test_inputs_are_reproducible_from_the_seed_and_cauchy_is_heavy_tailed() -> None:
    a = generate(_case(distribution="cauchy", seqlen=16, dim=32), 5, "cpu")
    b = generate(_case(distribution="cauchy", seqlen=16, dim=32), 5, "cpu")
    c = generate(_case(distribution="cauchy", seqlen=16, dim=32), 6, "cpu")
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert bool(torch.isfinite(a[0]).all()) and float(a[0].abs().max()) > 50  # Cauchy(0, 2) tails


def test_boolean_fields_must_be_booleans() -> None:
    with pytest.raises(ValueError):
        _case(nomask="False")  # upstream's parser turned this string into "true"


def test_manifest_has_the_upstream_cases() -> None:
    v = default_registry().get("trimul-h100")
    tests, benches = v.scorer_params["tests"], v.scorer_params["benchmarks"]
    assert len(tests) == 18 and len(benches) == 7
    assert [b["seed"] for b in benches] == [9371, 381, 2301, 12819, 381, 481, 23291]
    assert sum(not t["nomask"] for t in tests) == 7
    assert {t["hiddendim"] for t in tests + benches} == {128}
    assert v.timeout_s == 1200.0 and v.hardware.gpu == "H100 SXM"
    assert default_registry().get("trimul-a100").hardware.gpu == "A100 SXM4 80GB"


def test_gpu_variant_refuses_a_machine_without_its_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    monkeypatch.delenv(OVERRIDE_ENV, raising=False)
    v = default_registry().get("trimul-h100")
    s = TriMulScorer(v, v.family_dir)
    with pytest.raises(InfraError, match="needs an NVIDIA H100"):
        s.prepare()
    monkeypatch.setenv(OVERRIDE_ENV, "1")
    s.prepare()
    assert s.device.override and s.device.device == "cpu" and len(s.benchmarks) == 7


def test_tiny_variant_scores_the_initial_program_in_the_sandbox() -> None:
    """The full evaluation, then ``trimul-tiny~quick`` on the same warm worker: every test, 3 timed
    requests per benchmark, labelled as a reduced mode."""
    v = default_registry().get("trimul-tiny")
    with LocalBackend(workers=1, mode="warm") as b:
        res = b.evaluate(v, v.initial_program)
        quick = b.evaluate(default_registry().get("trimul-tiny~quick"), v.initial_program)
    assert quick.status is Status.OK, quick.reason
    assert quick.metrics["quick"] == 1.0 and res.metrics["quick"] == 0.0
    benches = [c for c in quick.cases if c.score is not None]
    assert len(quick.cases) == 4 + 2 and len(benches) == 2
    for c in benches:
        assert c.reason.startswith("reduced mode (trimul-tiny~quick; not a full evaluation)")
        assert "in 3 requests" in c.reason or "(3 requests in all)" in c.reason, c.reason
    assert res.status is Status.OK, res.reason
    assert res.score is not None and res.score > 0
    assert res.metrics["timing_cpu"] == 1.0 and res.metrics["gpu_override"] == 0.0
    assert res.device == "cpu"  # the scorer's device, recorded with every result
    assert res.metrics["timed_calls"] >= 6
    assert res.score == pytest.approx(res.metrics["score_us"])
    assert res.metrics["round_trip_us"] >= res.metrics["score_us"]
