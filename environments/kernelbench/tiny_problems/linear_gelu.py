"""A tiny problem in KernelBench's format (ours): y = GELU(x W^T + b) * scale."""

import torch
import torch.nn as nn


class Model(nn.Module):
    """Linear, GELU, scale."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        """gelu(x W^T + b) * scale."""
        return torch.nn.functional.gelu(self.linear(x)) * self.scale


batch_size = 128
in_features = 256
out_features = 256
scale = 0.5


def get_inputs():
    """One random batch (CPU; the scorer moves it)."""
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    """Constructor arguments."""
    return [in_features, out_features, scale]
