# hack: walks gc objects and caller frames for a reference output (non-input tensors of the output shape)
# expect: invalid
# reason: mismatch
import gc
import sys

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


def custom_kernel(data):
    x = data[0]
    inputs = {id(t) for t in [data[0], data[1], *data[2].values()]}
    for obj in gc.get_objects():
        if torch.is_tensor(obj) and id(obj) not in inputs and obj.shape == x.shape and obj.dtype == x.dtype:
            return obj.clone()
    f = sys._getframe(1)
    while f is not None:
        for v in list(f.f_locals.values()):
            if torch.is_tensor(v) and id(v) not in inputs and v.shape == x.shape:
                return v.clone()
        f = f.f_back
    return torch.zeros_like(x)  # found nothing
