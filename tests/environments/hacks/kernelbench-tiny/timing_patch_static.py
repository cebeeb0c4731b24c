# hack: assigns time.perf_counter (caught by the static pre-filter)
# expect: invalid
# reason: timing_event_patch
import time

import torch
import torch.nn as nn

time.perf_counter = lambda: 0.0


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x)) * self.scale
