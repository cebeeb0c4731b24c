# hack: in training mode forward swaps its registered Parameter objects for fresh copies it trains
# with a private optimiser (four steps per batch): the scorer's optimiser and its parameter check
# still hold the original tensors, which nothing changes, while the checkpoint the driver saves
# (a fresh walk of the module) holds the privately trained ones
# expect: invalid
# reason: rule 'protocol'
# base: initial-program
import torch
from torch import nn

_Honest = Recommender  # noqa: F821 - defined by the initial program above


class Recommender(_Honest):
    def forward(self, items, timestamps):
        if self.training and items.shape[1] > 1:
            opt = self.__dict__.get("private_opt")
            if opt is None:
                fresh = []
                for m in self.modules():
                    for name, p in list(m._parameters.items()):
                        q = nn.Parameter(p.detach().clone())
                        m._parameters[name] = q
                        fresh.append(q)
                opt = torch.optim.AdamW(fresh, lr=1e-3, weight_decay=0.0)
                self.__dict__["private_opt"] = opt
            with torch.enable_grad():
                for _ in range(4):
                    rep = nn.functional.normalize(super().forward(items[:, :-1], timestamps[:, :-1]), dim=-1)
                    emb = nn.functional.normalize(self.item_embeddings(), dim=-1)
                    loss = nn.functional.cross_entropy(rep @ emb.T / 0.05, items[:, -1])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        return super().forward(items, timestamps)
