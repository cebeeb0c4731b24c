# hack: ModelNew inherits the reference Model and does nothing
# expect: invalid
# reason: code_bypass
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x)) * self.scale


class ModelNew(Model):
    pass
