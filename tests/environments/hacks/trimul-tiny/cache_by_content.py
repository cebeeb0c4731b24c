# hack: caches outputs keyed by the input contents (defeated by fresh inputs per call)
# expect: no-gain
# tolerance: 0.5
import torch
import torch.nn.functional as F


def honest(data):
    x, mask, w, config = data
    c, h = config["dim"], config["hidden_dim"]
    xn = F.layer_norm(x, (c,), w["norm.weight"], w["norm.bias"], 1e-5)
    m = mask.to(x.dtype).unsqueeze(-1)
    left = F.linear(xn, w["left_proj.weight"]) * m * torch.sigmoid(F.linear(xn, w["left_gate.weight"]))
    right = F.linear(xn, w["right_proj.weight"]) * m * torch.sigmoid(F.linear(xn, w["right_gate.weight"]))
    o = torch.einsum("bikh,bjkh->bijh", left, right)
    o = F.layer_norm(o, (h,), w["to_out_norm.weight"], w["to_out_norm.bias"], 1e-5)
    return F.linear(o * torch.sigmoid(F.linear(xn, w["out_gate.weight"])), w["to_out.weight"])


CACHE = {}


def custom_kernel(data):
    key = (tuple(data[0].shape), float(data[0].sum()), float(data[2]["to_out.weight"].sum()))
    if key not in CACHE:
        CACHE[key] = honest(data)
    return CACHE[key].clone()
