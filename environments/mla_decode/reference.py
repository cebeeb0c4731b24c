"""MLA decode (DeepSeek-V3 multi-head latent attention, one new token), from the maths; trusted side.

x: [bs, 1, dim] bf16; KV cache [bs, max_seq_len, kv_lora_rank + rope] bf16 holding ``prefill`` rows.
1. q_lora = x Wqd^T; kv_new = x Wkvd^T; the cache row ``prefill`` := kv_new; kv_len = prefill + 1.
2. q = q_lora Wqu^T -> per head [nope | rope]; cache rows -> [latent | k_rope] (k_rope shared).
3. latent Wkvu^T -> per head [k_nope | v].
4. RoPE (rotate-half) on q_rope at position kv_len - 1 and on k_rope at 0..kv_len-1, with
   theta_i = 10000^(-2i / rope) computed in bf16, cos/sin in bf16.
5. softmax(q k^T / sqrt(nope + rope)) in fp32, cast to bf16; y = attn v; out = concat_heads(y) Wo^T.
Returns (out [bs, 1, dim] bf16, the updated cache). Weights ~ N(0, 1) / sqrt(fan_in) in bf16.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictInt

WEIGHT_KEYS = ("Q_proj_down", "Q_proj_up", "KV_proj_down", "KV_proj_up", "wo")


class MLAConfig(BaseModel):
    """Model shapes (DeepSeek-V3 by default)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch_size: StrictInt = 128
    dim: StrictInt = 7168
    q_lora_rank: StrictInt = 1536
    n_heads: StrictInt = 128
    kv_lora_rank: StrictInt = 512
    qk_rope_head_dim: StrictInt = 64
    qk_nope_head_dim: StrictInt = 128
    v_head_dim: StrictInt = 128
    max_seq_len: StrictInt = 8192


def generate(cfg: MLAConfig, prefill: int, seed: int, device: str) -> list[Any]:
    """``[config, x, kv_cache]`` for one call: config is a dict of shapes plus the five weights."""
    import torch

    if not 0 <= prefill < cfg.max_seq_len:
        raise ValueError(f"prefill {prefill} outside [0, {cfg.max_seq_len})")
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    bf = torch.bfloat16
    h, nope, rope, v = cfg.n_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim

    def w(out_f: int, in_f: int) -> Any:
        t = torch.randn((out_f, in_f), generator=gen, device=device, dtype=torch.float32)
        return (t / math.sqrt(in_f)).to(bf)

    weights = {
        "Q_proj_down": w(cfg.q_lora_rank, cfg.dim),
        "Q_proj_up": w((nope + rope) * h, cfg.q_lora_rank),
        "KV_proj_down": w(cfg.kv_lora_rank + rope, cfg.dim),
        "KV_proj_up": w((nope + v) * h, cfg.kv_lora_rank),
        "wo": w(cfg.dim, v * h),
    }
    x = torch.randn((cfg.batch_size, 1, cfg.dim), generator=gen, device=device, dtype=torch.float32).to(bf)
    cache = torch.zeros((cfg.batch_size, cfg.max_seq_len, cfg.kv_lora_rank + rope), device=device, dtype=bf)
    cache[:, :prefill] = torch.randn(
        (cfg.batch_size, prefill, cfg.kv_lora_rank + rope), generator=gen, device=device, dtype=torch.float32
    ).to(bf)
    config = {**cfg.model_dump(), "weights": weights}
    return [config, x, {"data": cache, "seq_len": prefill}]


def _rope(t: Any, pos: Any, rope: int) -> Any:
    import torch

    half = rope // 2
    theta = 10000.0 ** (-torch.arange(0, half, device=t.device, dtype=torch.bfloat16) * 2 / rope)
    theta = theta.to(torch.bfloat16)
    freqs = pos.to(torch.bfloat16)[:, None] * theta[None, :]
    cos = torch.cat([freqs.cos(), freqs.cos()], -1).to(torch.bfloat16)
    sin = torch.cat([freqs.sin(), freqs.sin()], -1).to(torch.bfloat16)
    rotated = torch.cat([-t[..., half:], t[..., :half]], -1)
    return t * cos + rotated * sin


def mla_decode(config: dict[str, Any], x: Any, kv: dict[str, Any]) -> tuple[Any, Any]:
    """The reference: returns (output, updated cache); ``kv["data"]`` is updated in place."""
    import torch

    w = config["weights"]
    bs, h = x.shape[0], config["n_heads"]
    nope, rope, v = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    lora = config["kv_lora_rank"]
    cache, prefill = kv["data"], int(kv["seq_len"])
    q_lora = x @ w["Q_proj_down"].T
    cache[:, prefill : prefill + 1] = x @ w["KV_proj_down"].T
    kv_len = prefill + 1
    q = (q_lora @ w["Q_proj_up"].T).view(bs, 1, h, nope + rope)
    q_nope, q_rope = q[..., :nope], q[..., nope:]
    rows = cache[:, :kv_len]
    latent, k_rope = rows[..., :lora], rows[..., lora:]
    kvu = (latent @ w["KV_proj_up"].T).view(bs, kv_len, h, nope + v)
    k_nope, val = kvu[..., :nope], kvu[..., nope:]
    q_rope = _rope(q_rope, torch.tensor([kv_len - 1], device=x.device), rope)
    k_rope = _rope(k_rope, torch.arange(kv_len, device=x.device), rope)
    qh = torch.cat([q_nope, q_rope], -1).transpose(1, 2)  # [bs, h, 1, d]
    kh = torch.cat([k_nope, k_rope[:, :, None, :].expand(bs, kv_len, h, rope)], -1).transpose(1, 2)
    scores = (qh.float() @ kh.float().transpose(-1, -2)) / math.sqrt(nope + rope)
    attn = torch.softmax(scores, dim=-1).to(torch.bfloat16)
    y = (attn @ val.transpose(1, 2)).transpose(1, 2).reshape(bs, 1, h * v)
    return y @ w["wo"].T, cache
