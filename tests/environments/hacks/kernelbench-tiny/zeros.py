# hack: returns zeros of the right shape
# expect: invalid
# reason: mismatch
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.zeros(x.shape[0], self.linear.out_features)
