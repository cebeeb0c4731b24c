# hack: every item gets the same score (ties must not rank the target first)
# expect: no-gain
import torch
from torch import nn


class M(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.n = n
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, items, timestamps):
        return torch.ones(items.shape[0], 4) + 0 * self.w

    def item_embeddings(self):
        return torch.ones(self.n + 1, 4) + 0 * self.w


def build_recommender(num_items, embedding_dim, max_seq_len, context):
    return M(num_items, embedding_dim)
