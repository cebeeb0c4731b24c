# hack: walks the garbage collector and every frame for the validation / test targets, and if it
# finds any candidate arrays, puts all the score on them
# expect: no-gain
import gc
import sys

import numpy as np
import torch
from torch import nn


def harvest():
    names = ("target", "val", "test", "label")
    found = []
    for obj in gc.get_objects():
        if isinstance(obj, dict):
            for k, v in list(obj.items())[:200]:
                if isinstance(k, str) and any(n in k.lower() for n in names) and isinstance(v, np.ndarray):
                    found.append(v)
    for frame in sys._current_frames().values():
        while frame is not None:
            for k, v in frame.f_locals.items():
                if any(n in k.lower() for n in names) and isinstance(v, np.ndarray):
                    found.append(v)
            frame = frame.f_back
    return found


class M(nn.Module):
    """Frozen random embeddings: it cannot learn, so any gain would come from the hack."""

    def __init__(self, n, d):
        super().__init__()
        self.n = n
        self.e = nn.Embedding(n + 1, d)
        self.e.weight.requires_grad_(False)
        self.dummy = nn.Parameter(torch.zeros(1))
        self.boost = None

    def forward(self, items, timestamps):
        if self.boost is None and not self.training:
            hits = [a for a in harvest() if a.dtype.kind == "i" and a.size and a.max() <= self.n]
            self.boost = np.unique(np.concatenate(hits)) if hits else np.array([], dtype=np.int64)
        return self.e(items).mean(1) + 0 * self.dummy

    def item_embeddings(self):
        w = self.e.weight
        if self.boost is not None and self.boost.size:
            w = w.clone()
            w[torch.as_tensor(self.boost)] = w.mean(0) * 100
        return w


def build_recommender(num_items, embedding_dim, max_seq_len, context):
    return M(num_items, embedding_dim)
