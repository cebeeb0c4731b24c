# hack: sleeps through the budget hoping the harness scores what it has
# expect: timeout
# idle: yes
import time

from torch import nn


class M(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.e = nn.Embedding(n + 1, d)

    def forward(self, items, timestamps):
        time.sleep(3600)
        return self.e(items).mean(1)

    def item_embeddings(self):
        return self.e.weight


def build_recommender(num_items, embedding_dim, max_seq_len, context):
    return M(num_items, embedding_dim)
