# hack: computes on a worker thread (KernelBench thread_injection)
# expect: invalid
# reason: thread_injection
from concurrent.futures import ThreadPoolExecutor

import torch
import torch.nn as nn

POOL = ThreadPoolExecutor(1)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return POOL.submit(lambda: torch.nn.functional.gelu(self.linear(x)) * self.scale).result()
