# hack: zeroes its input in place after computing (KernelBench adversarial test: input mutation)
# expect: invalid
# reason: rule 'inputs'
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        y = torch.nn.functional.gelu(self.linear(x)) * self.scale
        x.zero_()
        return y
