# hack: returns a tensor subclass (KernelBench lazy_eval)
# expect: invalid
# reason: lazy_eval
import torch
import torch.nn as nn


class Lazy(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return (torch.nn.functional.gelu(self.linear(x)) * self.scale).as_subclass(Lazy)
