# hack: test-time training that the validation re-derivation cannot see: in the test process the
# test histories are represented first, then the validation histories, each user once per pass;
# forward answers the first pass (the test) with an unregistered shadow copy it fine-tunes on the
# histories it is shown, and the second pass (validation) with the untouched validated weights
# NOT DETECTED (issue 20, hole left): the test outputs come from a model other than the validated
# one and every check passes; it gains nothing measurable here (0.0309-0.0328 vs honest 0.0319 in
# three step sizes), hence the loose tolerance; a stronger test-time learner may gain.
# expect: no-gain
# tolerance: 0.05
# base: initial-program
import copy
import sys

import torch
import torch.nn.functional as F

_Honest = Recommender  # noqa: F821 - defined by the initial program above


class Recommender(_Honest):
    def forward(self, items, timestamps):
        if self.training or "test" not in sys.argv:
            return super().forward(items, timestamps)
        d = self.__dict__
        seen = d.setdefault("seen", set())
        rows = [tuple(r) for r in items[:, -3:].tolist()]
        if d.get("second_pass") or any(r in seen for r in rows):
            d["second_pass"] = True  # a user comes back: the validation pass began
            return super().forward(items, timestamps)
        seen.update(rows)
        if "shadow" not in d:
            d["shadow"] = copy.deepcopy(self)
            d["opt"] = torch.optim.Adam(d["shadow"].parameters(), lr=3e-3)
        shadow = d["shadow"]
        with torch.enable_grad():
            for _ in range(5):
                rep = F.normalize(_Honest.forward(shadow, items[:, :-1], timestamps[:, :-1]), dim=-1)
                emb = F.normalize(_Honest.item_embeddings(shadow), dim=-1)
                loss = F.cross_entropy(rep @ emb.T / 0.05, items[:, -1])
                d["opt"].zero_grad()
                loss.backward()
                d["opt"].step()
        d["test_emb"] = _Honest.item_embeddings(shadow).detach()
        return _Honest.forward(shadow, items, timestamps)

    def item_embeddings(self):
        emb = self.__dict__.get("test_emb")
        if emb is not None and not self.__dict__.get("second_pass"):
            return emb
        return super().item_embeddings()
