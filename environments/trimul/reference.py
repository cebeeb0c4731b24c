"""TriMul (outgoing triangle multiplicative update), written from the maths; trusted side only.

x in R^{B x N x N x C}, mask m in {0,1}^{B x N x N}, hidden H:
  xn = LayerNorm_C(x);  L = (xn W_lp^T) * m * sigmoid(xn W_lg^T);  R likewise with W_rp, W_rg
  O[b,i,j,h] = sum_k L[b,i,k,h] R[b,j,k,h]
  y = (LayerNorm_H(O) * sigmoid(xn W_og^T)) W_out^T
Inputs are generated from one seed on the evaluation's device; Cauchy(0, 2) samples come from the
same seeded generator by the inverse CDF, so every case is reproducible (upstream draws them from
the global RNG, ignoring the case seed).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictBool, StrictInt

WEIGHT_KEYS = (
    "norm.weight",
    "norm.bias",
    "left_proj.weight",
    "right_proj.weight",
    "left_gate.weight",
    "right_gate.weight",
    "out_gate.weight",
    "to_out_norm.weight",
    "to_out_norm.bias",
    "to_out.weight",
)


class TriMulCase(BaseModel):
    """One case of the task; booleans are real booleans (upstream parsed ``nomask: False`` as true)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seqlen: StrictInt
    bs: StrictInt
    dim: StrictInt
    hiddendim: StrictInt
    seed: StrictInt
    nomask: StrictBool
    distribution: Literal["normal", "cauchy"]


def generate(case: TriMulCase, seed: int, device: str) -> list[Any]:
    """``[input, mask, weights, config]`` for one call (fp32; mask float ones or int64 0/1)."""
    import torch

    n, b, c, h = case.seqlen, case.bs, case.dim, case.hiddendim
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    if case.distribution == "cauchy":
        u = torch.rand((b, n, n, c), generator=gen, device=device, dtype=torch.float32)
        u = u.clamp(1e-6, 1 - 1e-6)  # tan at exactly +-pi/2 would be infinite
        x = 2.0 * torch.tan(math.pi * (u - 0.5))
    else:
        x = torch.randn((b, n, n, c), generator=gen, device=device, dtype=torch.float32)
    if case.nomask:
        mask = torch.ones((b, n, n), device=device, dtype=torch.float32)
    else:
        mask = torch.randint(0, 2, (b, n, n), generator=gen, device=device, dtype=torch.int64)

    def randn(*shape: int, scale: float = 1.0) -> Any:
        return torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * scale

    weights = {
        "norm.weight": randn(c),
        "norm.bias": randn(c),
        "left_proj.weight": randn(h, c, scale=1 / math.sqrt(h)),
        "right_proj.weight": randn(h, c, scale=1 / math.sqrt(h)),
        "left_gate.weight": randn(h, c, scale=1 / math.sqrt(h)),
        "right_gate.weight": randn(h, c, scale=1 / math.sqrt(h)),
        "out_gate.weight": randn(h, c, scale=1 / math.sqrt(h)),
        "to_out_norm.weight": randn(h),
        "to_out_norm.bias": randn(h),
        "to_out.weight": randn(c, h, scale=1 / math.sqrt(c)),
    }
    return [x, mask, weights, {"dim": c, "hidden_dim": h}]


def trimul(x: Any, mask: Any, w: dict[str, Any], eps: float = 1e-5) -> Any:
    """The reference forward pass in fp32 (TF32 off on CUDA)."""
    import torch
    import torch.nn.functional as F

    prev = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        c, h = x.shape[-1], w["left_proj.weight"].shape[0]
        xn = F.layer_norm(x, (c,), w["norm.weight"], w["norm.bias"], eps)
        m = mask.to(x.dtype).unsqueeze(-1)
        left = (xn @ w["left_proj.weight"].T) * m * torch.sigmoid(xn @ w["left_gate.weight"].T)
        right = (xn @ w["right_proj.weight"].T) * m * torch.sigmoid(xn @ w["right_gate.weight"].T)
        o = torch.einsum("bikh,bjkh->bijh", left, right)
        o = F.layer_norm(o, (h,), w["to_out_norm.weight"], w["to_out_norm.bias"], eps)
        return (o * torch.sigmoid(xn @ w["out_gate.weight"].T)) @ w["to_out.weight"].T
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = prev
