# hack: at import, replaces torch.optim.AdamW.step with one that takes three steps per call (more
# training than the protocol's epochs allow)
# expect: invalid
# reason: rule 'protocol'
# base: initial-program
import torch

_step = torch.optim.AdamW.step


def _triple_step(self, closure=None):
    for _ in range(3):
        out = _step(self, closure)
    return out


torch.optim.AdamW.step = _triple_step
