# hack: declares a hyperparameter the protocol does not allow (more epochs)
# expect: invalid
# reason: rule 'hyperparameters'
from torch import nn

HYPERPARAMETERS = {"epochs": 100, "lr": 1e-3}


class M(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.e = nn.Embedding(n + 1, d)

    def forward(self, items, timestamps):
        return self.e(items).mean(1)

    def item_embeddings(self):
        return self.e.weight


def build_recommender(num_items, embedding_dim, max_seq_len, context):
    return M(num_items, embedding_dim)
