"""MLA-Decode: reference against a per-head float64 computation, cache update, cases, sandbox scoring."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from environments.mla_decode.reference import MLAConfig, generate, mla_decode
from environments.mla_decode.scorer import CACHE_INDEX, MLAScorer, MLATask
from harness.envs.registry import default_registry
from harness.evaluation.errors import CandidateInvalid, InfraError
from harness.evaluation.result import Status
from harness.kernels.checks import TensorOut
from harness.kernels.evaluate import Case
from harness.sandbox.local import LocalBackend
from harness.scoring.device import OVERRIDE_ENV

TINY = MLAConfig(
    batch_size=2,
    dim=64,
    q_lora_rank=16,
    n_heads=2,
    kv_lora_rank=8,
    qk_rope_head_dim=4,
    qk_nope_head_dim=4,
    v_head_dim=4,
    max_seq_len=16,
)


def _slow(config: dict, x: torch.Tensor, cache: torch.Tensor, n: int) -> np.ndarray:
    """Per batch, per head loops in float64 from the same (bf16) inputs and bf16 RoPE tables."""
    w = {k: v.double() for k, v in config["weights"].items()}
    h, nope, rope, vd, lora = 2, 4, 4, 4, 8
    xd = x.double()[:, 0]
    new = xd @ w["KV_proj_down"].T
    rows = torch.cat([cache[:, :n].double(), new[:, None]], 1)
    q = ((xd @ w["Q_proj_down"].T) @ w["Q_proj_up"].T).view(-1, h, nope + rope)
    theta = (10000.0 ** (-torch.arange(0, rope // 2, dtype=torch.bfloat16) * 2 / rope)).to(torch.bfloat16)

    def rot(t: torch.Tensor, p: int) -> torch.Tensor:
        f = torch.tensor(float(p), dtype=torch.bfloat16) * theta
        c = torch.cat([f.cos(), f.cos()]).to(torch.bfloat16).double()
        s = torch.cat([f.sin(), f.sin()]).to(torch.bfloat16).double()
        return t * c + torch.cat([-t[rope // 2 :], t[: rope // 2]]) * s

    out = np.zeros((x.shape[0], h * vd))
    for b in range(x.shape[0]):
        for hh in range(h):
            up = w["KV_proj_up"].view(h, nope + vd, lora)[hh]
            qv = torch.cat([q[b, hh, :nope], rot(q[b, hh, nope:], n)])
            scores = []
            for t in range(n + 1):
                k = torch.cat([up[:nope] @ rows[b, t, :lora], rot(rows[b, t, lora:], t)])
                scores.append(float(qv @ k) / math.sqrt(nope + rope))
            p = np.exp(np.array(scores) - max(scores))
            p /= p.sum()
            vals = np.stack([(up[nope:] @ rows[b, t, :lora]).numpy() for t in range(n + 1)])
            out[b, hh * vd : (hh + 1) * vd] = p @ vals
    return out @ w["wo"].numpy().T


@pytest.mark.parametrize(("n", "seed"), [(0, 1), (5, 2), (15, 3)])
def test_reference_matches_per_head_loops_and_updates_the_cache(n: int, seed: int) -> None:
    config, x, kv = generate(TINY, n, seed, "cpu")
    before = kv["data"].clone()
    out, cache = mla_decode(config, x, kv)
    assert out.dtype == torch.bfloat16 and out.shape == (2, 1, 64) and cache is kv["data"]
    want = _slow(config, x, before, n)
    np.testing.assert_allclose(out.float().numpy()[:, 0], want, rtol=5e-2, atol=3e-2)
    new = (x @ config["weights"]["KV_proj_down"].T)[:, 0]
    assert torch.equal(cache[:, n], new) and torch.equal(cache[:, :n], before[:, :n])
    assert not cache[:, n + 1 :].any()


def test_inputs_reproducible_and_the_cache_is_the_mutable_input() -> None:
    a, b = generate(TINY, 5, 9, "cpu"), generate(TINY, 5, 9, "cpu")
    assert torch.equal(a[2]["data"], b[2]["data"]) and torch.equal(
        a[0]["weights"]["wo"], b[0]["weights"]["wo"]
    )
    leaves = [*a[0]["weights"].values(), a[1], a[2]["data"]]
    assert leaves[CACHE_INDEX] is a[2]["data"]


def test_check_rejects_a_stale_cache_and_a_wrong_output() -> None:

    task = MLATask(TINY, "cpu", 2e-2, 8e-3)
    case = Case("t", 1, {"prefill": 5})
    args = generate(TINY, 5, 4, "cpu")
    stale = TensorOut.of(args[2]["data"].clone())
    ref_args = generate(TINY, 5, 4, "cpu")
    good_out, good_cache = mla_decode(*ref_args)
    with pytest.raises(CandidateInvalid, match="kv_cache"):
        task.check(case, generate(TINY, 5, 4, "cpu"), [TensorOut.of(good_out), stale])
    with pytest.raises(CandidateInvalid, match="output"):
        task.check(case, generate(TINY, 5, 4, "cpu"), [TensorOut.of(good_out * 2), TensorOut.of(good_cache)])
    task.check(case, args, [TensorOut.of(good_out), TensorOut.of(good_cache)])


def test_manifest_cases_and_gpu_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    v = default_registry().get("mla-decode-h200")
    assert [(c["prefill"], c["seed"]) for c in v.scorer_params["tests"]] == [
        (128, 9247),
        (512, 2197),
        (1024, 9107),
        (2048, 5291),
    ]
    assert [(c["prefill"], c["seed"]) for c in v.scorer_params["benchmarks"]] == [(4096, 9817), (6144, 5291)]
    assert v.hardware.gpu == "H200 SXM" and MLAConfig() == MLAConfig(**v.scorer_params["model"])
    if not torch.cuda.is_available():
        monkeypatch.delenv(OVERRIDE_ENV, raising=False)
        with pytest.raises(InfraError, match="needs an NVIDIA H200"):
            MLAScorer(v, v.family_dir).prepare()


def test_tiny_variant_scores_the_initial_program_in_the_sandbox() -> None:
    v = default_registry().get("mla-decode-tiny")
    with LocalBackend(workers=1, mode="warm") as b:
        res = b.evaluate(v, v.initial_program)
    assert res.status is Status.OK, res.reason
    assert res.score is not None and res.score > 0 and res.metrics["timing_cpu"] == 1.0


MARGIN = 0.8
"""The honest initial program must stay within this fraction of the tolerance on the tiny variant."""


def test_tiny_cases_leave_the_honest_initial_program_a_margin_to_the_tolerance() -> None:
    """Every call draws fresh inputs, so an honest program that sometimes grazes the tolerance fails
    evaluations at random (version 1.0.0's prefills 8-63 did, on about 1 call in 1,000). Over 200
    fixed seeds per case, the absorbed initial program passes the scorer's own check at 0.8 of the
    tolerance (measured worst: 0.65 over 6,000 calls)."""
    import importlib.util

    v = default_registry().get("mla-decode-tiny")
    cfg = MLAConfig(**v.scorer_params["model"])
    p = v.scorer_params
    task = MLATask(cfg, "cpu", MARGIN * float(p["rtol"]), MARGIN * float(p["atol"]))
    spec = importlib.util.spec_from_file_location("mla_initial", v.family_dir / "initial_program.py")
    assert spec is not None and spec.loader is not None
    program = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(program)
    for raw in [*p["tests"], *p["benchmarks"]]:
        case = Case(f"prefill{raw['prefill']}", 0, {"prefill": raw["prefill"]})
        for seed in range(200):
            args = generate(cfg, int(raw["prefill"]), seed, "cpu")
            honest = [args[0], args[1].clone(), {**args[2], "data": args[2]["data"].clone()}]
            out, cache = program.custom_kernel(tuple(honest))
            task.check(case, args, [TensorOut.of(out), TensorOut.of(cache)])
