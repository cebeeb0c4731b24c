"""MLA decode (DeepSeek-V3 latent attention, one new token): a correct, unoptimised PyTorch version."""

import math

import torch

# EVOLVE-BLOCK-START


def _rope(t, pos, dim):
    half = dim // 2
    theta = (10000.0 ** (-torch.arange(0, half, device=t.device, dtype=torch.bfloat16) * 2 / dim)).to(
        torch.bfloat16
    )
    freqs = pos.to(torch.bfloat16)[:, None] * theta[None, :]
    cos = torch.cat([freqs.cos(), freqs.cos()], -1).to(torch.bfloat16)
    sin = torch.cat([freqs.sin(), freqs.sin()], -1).to(torch.bfloat16)
    return t * cos + torch.cat([-t[..., half:], t[..., :half]], -1) * sin


def custom_kernel(data):
    """data = (config, x [bs,1,dim] bf16, kv_cache {"data": [bs,max_seq,lora+rope] bf16, "seq_len": n}).

    Returns (output [bs,1,dim] bf16, the kv cache with row n set to this token's latent + k_rope).
    """
    config, x, kv = data
    w = config["weights"]
    bs, h = x.shape[0], config["n_heads"]
    nope, rope, vd = config["qk_nope_head_dim"], config["qk_rope_head_dim"], config["v_head_dim"]
    lora = config["kv_lora_rank"]
    cache, n = kv["data"], kv["seq_len"]
    cache[:, n : n + 1] = x @ w["KV_proj_down"].T
    kv_len = n + 1
    q = ((x @ w["Q_proj_down"].T) @ w["Q_proj_up"].T).view(bs, h, nope + rope)
    q_nope = q[..., :nope]
    q_rope = _rope(q[..., nope:], torch.tensor([kv_len - 1], device=x.device), rope)
    latent, k_rope = cache[:, :kv_len, :lora], cache[:, :kv_len, lora:]
    k_rope = _rope(k_rope, torch.arange(kv_len, device=x.device), rope)
    up = w["KV_proj_up"].view(h, nope + vd, lora)
    # Absorb the key up-projection into the query: q_nope . (W_uk latent) = (W_uk^T q_nope) . latent
    q_lat = torch.einsum("bhn,hnl->bhl", q_nope.float(), up[:, :nope].float())
    scores = torch.einsum("bhl,btl->bht", q_lat, latent.float())
    scores = scores + torch.einsum("bhr,btr->bht", q_rope.float(), k_rope.float())
    attn = torch.softmax(scores / math.sqrt(nope + rope), dim=-1).to(torch.bfloat16)
    ctx = torch.einsum("bht,btl->bhl", attn.float(), latent.float())  # attention over latents
    y = torch.einsum("bhl,hvl->bhv", ctx, up[:, nope:].float()).to(torch.bfloat16)
    return y.reshape(bs, 1, h * vd) @ w["wo"].T, cache


# EVOLVE-BLOCK-END
