# hack: representations full of NaN (NaN must never compare as a wildcard)
# expect: invalid
# reason: rule 'finite'
from torch import nn


class M(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.e = nn.Embedding(n + 1, d)

    def forward(self, items, timestamps):
        out = self.e(items).mean(1)
        return out + (float("nan") if not self.training else 0.0)

    def item_embeddings(self):
        return self.e.weight


def build_recommender(num_items, embedding_dim, max_seq_len, context):
    return M(num_items, embedding_dim)
