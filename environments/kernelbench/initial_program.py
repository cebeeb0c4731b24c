"""KernelBench: a ModelNew equal to the reference Model (eager PyTorch); make it faster.

The variant's problem file (shown in the prompt) defines ``Model``; write ``ModelNew`` with the same
constructor and forward signature, creating parameters in the same order (they are initialised
from the same seed). This is the starting program of ``kernelbench-tiny`` only; every other
variant starts from its own problem file with ``Model`` renamed ``ModelNew`` (``problems.py``).
"""

import torch
import torch.nn as nn

# EVOLVE-BLOCK-START


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.nn.functional.gelu(torch.addmm(self.linear.bias, x, self.linear.weight.t())) * self.scale


# EVOLVE-BLOCK-END
