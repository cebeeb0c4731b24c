"""Sequential recommendation on KuaiRec: map a user's item history to a representation.

Baseline: item embeddings plus learned position embeddings, a single causal-free mixing step
(recency-weighted mean of the last items, with a learned decay) and a small residual MLP. The
trusted scorer trains it with sampled softmax over cosine similarities and ranks the whole
catalog by the cosine between the user representation and every item embedding.
"""

import torch
from torch import nn

# EVOLVE-BLOCK-START

DECAY_INIT = 0.1  # initial recency decay per position (learned)
HIDDEN_MULT = 2  # width of the MLP relative to the embedding
DROPOUT = 0.1

# Optional overrides within the manifest's bounds (lr, weight_decay).
HYPERPARAMETERS = {"lr": 1e-3}


class Recommender(nn.Module):
    def __init__(self, num_items: int, dim: int, max_seq_len: int) -> None:
        super().__init__()
        self.items = nn.Embedding(num_items + 1, dim, padding_idx=0)
        self.positions = nn.Embedding(max_seq_len, dim)
        self.log_decay = nn.Parameter(torch.tensor(float(DECAY_INIT)).log())
        self.mlp = nn.Sequential(
            nn.Linear(dim, HIDDEN_MULT * dim),
            nn.GELU(),
            nn.Dropout(DROPOUT),
            nn.Linear(HIDDEN_MULT * dim, dim),
        )
        self.norm = nn.LayerNorm(dim)
        nn.init.normal_(self.items.weight, std=0.1)
        nn.init.normal_(self.positions.weight, std=0.01)

    def forward(self, items: torch.Tensor, timestamps: torch.Tensor) -> torch.Tensor:
        # items, timestamps: [batch, length], left-padded with 0 (the last column is the latest).
        length = items.shape[1]
        age = torch.arange(length - 1, -1, -1, device=items.device)  # 0 for the latest item
        x = self.items(items) + self.positions(age.clamp(max=self.positions.num_embeddings - 1))
        weight = torch.exp(-self.log_decay.exp() * age.float()) * (items > 0).float()
        pooled = (weight.unsqueeze(-1) * x).sum(1) / weight.sum(1, keepdim=True).clamp(min=1e-6)
        return self.norm(pooled + self.mlp(pooled))

    def item_embeddings(self) -> torch.Tensor:
        return self.items.weight


# EVOLVE-BLOCK-END


def build_recommender(num_items: int, embedding_dim: int, max_seq_len: int, context: dict) -> nn.Module:
    """The module the scorer trains: forward(items, timestamps) -> [batch, d]; item_embeddings()."""
    return Recommender(num_items, embedding_dim, max_seq_len)
