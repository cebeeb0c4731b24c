# hack: a 'custom' path that falls back to PyTorch on any error (KernelBench code_bypass)
# expect: invalid
# reason: code_bypass
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        try:
            raise RuntimeError("custom kernel not built")
        except RuntimeError:
            return torch.nn.functional.gelu(self.linear(x)) * self.scale
