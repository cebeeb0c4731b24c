"""GPU MODE's MLA-Decode contract, candidate side: importable as ``reference`` (and ``task``).

Runs INSIDE the sandbox, in the candidate's process (it is candidate-side code: nothing here
decides a score). A submission written for GPU MODE's task files does ``from reference import
KVCache, Config`` and receives ``(config: Config, x, kv_cache: KVCache)``; evobench's own
submissions index ``config["weights"]["Q_proj_down"]`` and ``kv_cache["data"]``. The objects
below answer both, so either kind of submission runs unmodified.

Written from GPU MODE's published interface (field names, ``KVCache.forward`` semantics), not
copied: ``Config`` holds the shapes and the five ``*_weight`` tensors; ``KVCache`` is a module
whose ``data`` buffer is the cache and whose ``forward(c_kv)`` writes ``c_kv`` at ``seq_len``,
advances ``seq_len`` and returns ``(data[:, :seq_len], seq_len)``.
"""

from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from torch import nn

_WEIGHTS = {
    "Q_proj_down": "Q_proj_down_weight",
    "Q_proj_up": "Q_proj_up_weight",
    "KV_proj_down": "KV_proj_down_weight",
    "KV_proj_up": "KV_proj_up_weight",
    "wo": "wo_weight",
}


@dataclass
class Config:
    """GPU MODE's MLA config: shapes and the five projection weights (bf16)."""

    batch_size: int
    dim: int
    n_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    seq_len: int
    max_seq_len: int
    kv_cache_shape: tuple
    Q_proj_down_weight: torch.Tensor
    Q_proj_up_weight: torch.Tensor
    KV_proj_down_weight: torch.Tensor
    KV_proj_up_weight: torch.Tensor
    wo_weight: torch.Tensor

    @classmethod
    def from_evobench(cls, config: dict, seq_len: int) -> "Config":
        """Build from evobench's config dict (shapes plus ``weights``); ``seq_len`` = filled rows."""
        shapes = {k: v for k, v in config.items() if k != "weights"}
        weights = {_WEIGHTS[k]: v for k, v in config["weights"].items()}
        lora_rope = shapes["kv_lora_rank"] + shapes["qk_rope_head_dim"]
        shape = (shapes["batch_size"], shapes["max_seq_len"], lora_rope)
        return cls(**shapes, seq_len=seq_len, kv_cache_shape=shape, **weights)

    def __getitem__(self, key: str) -> Any:
        """Dict view as evobench passes it: ``config["n_heads"]``, ``config["weights"]["wo"]``."""
        if key == "weights":
            return {k: getattr(self, v) for k, v in _WEIGHTS.items()}
        if key in ("seq_len", "kv_cache_shape") or key.endswith("_weight"):
            raise KeyError(key)
        return getattr(self, key)


class KVCache(nn.Module):
    """GPU MODE's KV cache module (``data`` buffer, ``seq_len``, ``forward(c_kv)``)."""

    def __init__(self, kv_cache_shape: tuple, data: torch.Tensor | None = None, seq_len: int = 0) -> None:
        """A zero cache of ``kv_cache_shape`` (bf16, on the GPU when there is one), or ``data``."""
        super().__init__()
        if data is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
            data = torch.zeros(kv_cache_shape, dtype=torch.bfloat16, device=device)
        self.register_buffer("data", data)
        self.seq_len = seq_len

    def zero(self) -> None:
        """Clear the cache."""
        self.data.zero_()

    def get_data(self) -> torch.Tensor:
        """The whole cache tensor."""
        return self.data

    def forward(self, c_kv: torch.Tensor) -> tuple[torch.Tensor, int]:
        """Write ``c_kv`` at ``seq_len``, advance, return the filled rows and their count."""
        n = c_kv.size(1)
        assert self.seq_len + n <= self.data.size(1), "KV Cache Exceeded"
        self.data[:, self.seq_len : self.seq_len + n, :] = c_kv
        self.seq_len += n
        return self.data[:, : self.seq_len], self.seq_len

    def __getitem__(self, key: str) -> Any:
        """Dict view as evobench passes it: ``kv_cache["data"]``, ``kv_cache["seq_len"]``."""
        if key not in ("data", "seq_len"):
            raise KeyError(key)
        return getattr(self, key)


input_t = TypeVar("input_t", bound=tuple)
output_t = TypeVar("output_t", bound=tuple)
