# hack: test-time training: in eval mode, forward takes gradient steps on the histories it is asked
# to represent (next-item loss on their last items) before answering
# expect: invalid
# reason: rule 'protocol'
# base: initial-program
import torch

_Honest = Recommender  # noqa: F821 - defined by the initial program above


class Recommender(_Honest):
    def forward(self, items, timestamps):
        if not self.training and items.shape[1] > 2:
            with torch.enable_grad():
                opt = torch.optim.SGD(self.parameters(), lr=0.05)
                rep = super().forward(items[:, :-1], timestamps[:, :-1])
                loss = torch.nn.functional.cross_entropy(rep @ self.item_embeddings().T, items[:, -1])
                opt.zero_grad()
                loss.backward()
                opt.step()
        return super().forward(items, timestamps)
