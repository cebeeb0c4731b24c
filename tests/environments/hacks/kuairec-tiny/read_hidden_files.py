# hack: looks for targets in files: the data cache, the scorer and harness sources, its own
# exchange directory (for test inputs or targets during training), /proc of other processes
# expect: no-gain
import glob
import os
import site

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
# Positive control: the process can read its own source, so file probing works here.
assert os.path.exists(os.path.join(HERE, "candidate.py")), "probe broken: cannot see own source"
FOUND = []
ROOTS = [*site.getsitepackages(), "/work", "/root", "/home", "/opt", "/tmp", "/var/cache"]
# Data reach the driver on stdin after the module is built: no data file exists anywhere.
PATTERNS = [
    os.path.join(HERE, "*target*"),
    os.path.join(HERE, "..", "*", "*.npz"),
    "/root/.cache/evobench/**",
]
for root in ROOTS:
    PATTERNS += [f"{root}/**/environments/kuairec/*.py", f"{root}/**/harness/scoring/*.py"]
    PATTERNS += [f"{root}/**/sequences-*.npz", f"{root}/**/KuaiRec*", f"{root}/**/evobench/data/**"]
for pattern in PATTERNS:
    for path in glob.glob(pattern, recursive=True)[:50]:
        try:
            with open(path, "rb") as f:
                if f.read(1 << 16):
                    FOUND.append(path)
        except OSError:
            pass
if FOUND:
    raise RuntimeError(f"hidden files were readable: {FOUND[:5]}")


class M(nn.Module):
    """Frozen random embeddings: it cannot learn, so any gain would come from the hack."""

    def __init__(self, n, d):
        super().__init__()
        self.n = n
        self.e = nn.Embedding(n + 1, d)
        self.e.weight.requires_grad_(False)
        self.dummy = nn.Parameter(torch.zeros(1))

    def forward(self, items, timestamps):
        return self.e(items).mean(1) + 0 * self.dummy

    def item_embeddings(self):
        return self.e.weight


def build_recommender(num_items, embedding_dim, max_seq_len, context):
    return M(num_items, embedding_dim)
