"""A submission written for GPU MODE's MLA-Decode task files runs unmodified on ``mla-decode-tiny``.

It imports ``Config`` and ``KVCache`` from ``reference``, reads ``config.Q_proj_down_weight`` and
friends, appends to the cache by calling ``kv_cache(c_kv)`` and returns ``kv_cache.data``; the
adapter (environments/mla_decode/adapter.py, inside/) must make it score like the initial program.
"""

from __future__ import annotations

import math
import types

import pytest
import torch

from environments.mla_decode.adapter import wrap_source
from environments.mla_decode.inside import gpumode
from environments.mla_decode.reference import MLAConfig, generate, mla_decode
from harness.envs.registry import default_registry
from harness.evaluation.result import Status

GPUMODE_SUBMISSION = """
import math

import torch
from reference import Config, KVCache
from task import input_t, output_t


def rope(t, pos, dim):
    half = dim // 2
    i = torch.arange(0, half, dtype=torch.bfloat16, device=t.device)
    theta = (10000 ** (-i * 2 / dim)).to(torch.bfloat16)
    f = pos.to(torch.bfloat16)[:, None] * theta[None, :]
    cos = torch.cat([f.cos(), f.cos()], -1).to(torch.bfloat16)
    sin = torch.cat([f.sin(), f.sin()], -1).to(torch.bfloat16)
    return t * cos + torch.cat([-t[..., half:], t[..., :half]], -1) * sin


def custom_kernel(data: input_t) -> output_t:
    config, x, kv_cache = data
    assert isinstance(config, Config) and isinstance(kv_cache, KVCache)
    bs, h = config.batch_size, config.n_heads
    nope, rp = config.qk_nope_head_dim, config.qk_rope_head_dim
    vd, lora = config.v_head_dim, config.kv_lora_rank
    q = ((x @ config.Q_proj_down_weight.T) @ config.Q_proj_up_weight.T).view(bs, 1, h, nope + rp)
    kv, n = kv_cache(x @ config.KV_proj_down_weight.T)
    latent, k_rope = kv[..., :lora], kv[..., lora:]
    kvu = (latent @ config.KV_proj_up_weight.T).view(bs, n, h, nope + vd)
    k_nope, v = kvu[..., :nope], kvu[..., nope:]
    q_rope = rope(q[..., nope:].transpose(1, 2), torch.tensor([n - 1], device=x.device), rp)
    k_rope = rope(k_rope, torch.arange(n, device=x.device), rp)[:, None].expand(bs, h, n, rp)
    qf = torch.cat([q[..., :nope].transpose(1, 2), q_rope], -1)
    k = torch.cat([k_nope.transpose(1, 2), k_rope], -1)
    s = (qf.float() @ k.float().transpose(-1, -2)) / math.sqrt(nope + rp)
    attn = torch.softmax(s, -1).to(torch.bfloat16)
    y = (attn @ v.transpose(1, 2)).transpose(1, 2).reshape(bs, 1, h * vd)
    return y @ config.wo_weight.T, kv_cache.data
"""

TINY = MLAConfig(
    batch_size=2, dim=64, q_lora_rank=32, n_heads=4, kv_lora_rank=16,
    qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, max_seq_len=32,
)  # fmt: skip


def test_wrapped_submission_matches_the_reference_in_process() -> None:
    args = generate(TINY, 11, seed=5, device="cpu")
    mod = types.ModuleType("candidate")
    exec(compile(wrap_source(GPUMODE_SUBMISSION), "candidate.py", "exec"), mod.__dict__)
    mine = [args[0], args[1], {"data": args[2]["data"].clone(), "seq_len": args[2]["seq_len"]}]
    out, cache = mod.custom_kernel(mine)
    want_out, want_cache = mla_decode(*args)
    torch.testing.assert_close(out.float(), want_out.float(), rtol=2e-2, atol=8e-3)
    torch.testing.assert_close(cache.float(), want_cache.float(), rtol=2e-2, atol=8e-3)
    assert cache.data_ptr() == mine[2]["data"].data_ptr()  # updated in place, as GPU MODE's cache is


def test_compat_objects_answer_both_interfaces() -> None:
    config, _, kv = generate(TINY, 3, seed=1, device="cpu")
    c = gpumode.Config.from_evobench(config, 3)
    assert c.Q_proj_down_weight is config["weights"]["Q_proj_down"] and c["weights"]["wo"] is c.wo_weight
    assert c["n_heads"] == c.n_heads == 4 and c.kv_cache_shape == (2, 32, 24) and c.seq_len == 3
    with pytest.raises(KeyError):
        c["wo_weight"]
    cache = gpumode.KVCache(None, data=kv["data"], seq_len=3)
    rows, n = cache(torch.ones(2, 1, 24, dtype=torch.bfloat16))
    assert n == 4 == cache["seq_len"] and rows.shape == (2, 4, 24) and bool((kv["data"][:, 3] == 1).all())
    assert gpumode.KVCache((1, 2, 3)).get_data().dtype == torch.bfloat16
    assert math.isfinite(float(cache["data"].float().sum()))


def test_gpumode_submission_scores_unmodified_in_the_sandbox(local_backend: object) -> None:
    v = default_registry().get("mla-decode-tiny")
    res = local_backend.evaluate(v, GPUMODE_SUBMISSION)  # type: ignore[attr-defined]
    assert res.status is Status.OK, res.reason
    assert res.score is not None and res.score > 0 and res.metrics["timing_cpu"] == 1.0
    wrong = GPUMODE_SUBMISSION.replace("return y @ config.wo_weight.T", "return 2 * y @ config.wo_weight.T")
    bad = local_backend.evaluate(v, wrong)  # type: ignore[attr-defined]
    assert bad.status is Status.INVALID, bad.reason
