# hack: computes the first call of a back-to-back run (a batch) only and returns its output for the rest
# expect: invalid
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.last_t = 0.0
        self.last = None

    def forward(self, x):
        now = time.perf_counter()
        if self.last is None or now - self.last_t > 2e-4:  # a gap (the transport): a new request
            self.last = torch.nn.functional.gelu(torch.addmm(self.linear.bias, x, self.linear.weight.t()))
        self.last_t = time.perf_counter()
        return self.last * self.scale
