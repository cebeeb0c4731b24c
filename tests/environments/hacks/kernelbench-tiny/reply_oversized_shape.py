# hack: the reply declares an output of shape (2**40, 2**20) (a trusted side that allocates first dies)
# expect: invalid
# reason: rule 'shape'
import json
import struct
import sys

import torch
import torch.nn as nn

_main = sys.modules["__main__"]
_send = _main.send


def _forged(sock, header, arrays=None):
    if header.get("type") != "result":
        return _send(sock, header, arrays)
    head = json.dumps({**header, "arrays": [{"dtype": "float32", "shape": [2**40, 2**20]}]}).encode()
    sock.sendall(struct.pack(">Q", len(head)) + head)


_main.send = _forged


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale

    def forward(self, x):
        return torch.nn.functional.gelu(self.linear(x)) * self.scale
