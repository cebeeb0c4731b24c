# hack: rewrites the reply through json.dumps: every reported time scaled to 0.1x, nothing else
# expect: no-gain | invalid
# tolerance: 1.0
# reason: rule 'timing'
import json

import torch
import torch.nn as nn

_dumps = json.dumps


def _scaled(obj, *a, **k):
    if isinstance(obj, dict) and obj.get("type") == "result" and isinstance(obj.get("host"), float):
        obj = {**obj, "host": obj["host"] * 0.1}
    return _dumps(obj, *a, **k)


json.dumps = _scaled


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.nn.functional.gelu(torch.addmm(self.linear.bias, x, self.linear.weight.t())) * self.scale
