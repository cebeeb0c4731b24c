"""TriMul (outgoing triangle multiplicative update): a correct, unoptimised PyTorch version."""

import torch
import torch.nn.functional as F

# EVOLVE-BLOCK-START


def custom_kernel(data):
    """data = (input [B,N,N,C] fp32, mask [B,N,N], weights dict, config) -> output [B,N,N,C] fp32."""
    x, mask, w, config = data
    c, h = config["dim"], config["hidden_dim"]
    xn = F.layer_norm(x, (c,), w["norm.weight"], w["norm.bias"], 1e-5)
    m = mask.to(x.dtype).unsqueeze(-1)
    left = F.linear(xn, w["left_proj.weight"]) * m * torch.sigmoid(F.linear(xn, w["left_gate.weight"]))
    right = F.linear(xn, w["right_proj.weight"]) * m * torch.sigmoid(F.linear(xn, w["right_gate.weight"]))
    # O[b,i,j,h] = sum_k L[b,i,k,h] R[b,j,k,h], as a batched matmul over (b, h).
    lt = left.permute(0, 3, 1, 2)
    rt = right.permute(0, 3, 2, 1)
    o = torch.matmul(lt, rt).permute(0, 2, 3, 1)
    o = F.layer_norm(o, (h,), w["to_out_norm.weight"], w["to_out_norm.bias"], 1e-5)
    return F.linear(o * torch.sigmoid(F.linear(xn, w["out_gate.weight"])), w["to_out.weight"])


# EVOLVE-BLOCK-END
