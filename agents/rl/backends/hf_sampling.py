"""Batched, KV-cached sampling of rows with their own prompts, seeds, limits and constraints.

Prompts of different lengths are left-padded (attention mask and explicit position ids, so a
row sees exactly what it would see alone). Each row draws from its own ``torch.Generator``, so
its tokens do not depend on its batch mates' random draws, and a row with a constraint masks
its logits with its own :class:`~agents.rl.constrain.Matcher` before the temperature softmax:
the sampler draws from ``softmax(mask(logits) / T)`` and records ``log_softmax(mask(logits) / T)``
of the drawn token (a token the grammar forces has log-prob exactly 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agents.rl.constrain import Matcher


@dataclass
class RowResult:
    """What one row of :func:`sample_rows` produced."""

    tokens: list[int]
    """Sampled ids (the EOS id included when one was drawn)."""
    logprobs: list[float]
    """``log_softmax(mask(logits) / T)`` of each drawn id."""
    finished: bool
    """Whether the row ended on EOS (False: its token limit)."""


@torch.no_grad()
def sample_rows(
    model: Any,
    prompts: Sequence[Sequence[int]],
    max_new: Sequence[int],
    temperature: float,
    generators: Sequence[torch.Generator],
    matchers: Sequence[Matcher | None],
    eos_id: int,
    pad_id: int,
    *,
    keep_one_logit: bool,
) -> list[RowResult]:
    """Sample every row until EOS or its own limit (see the module docstring).

    Raises:
        ValueError: If the temperature is not positive, a prompt is empty or the per-row sequences
            differ in length.
    """
    if not temperature > 0:
        raise ValueError("temperature must be positive")
    n = len(prompts)
    if not (len(max_new) == len(generators) == len(matchers) == n):
        raise ValueError("one limit, generator and matcher per prompt")
    if any(len(p) == 0 for p in prompts):
        raise ValueError("empty prompt")
    device = next(model.parameters()).device
    width = max(len(p) for p in prompts)
    ids = torch.full((n, width), pad_id, dtype=torch.long, device=device)
    attn = torch.zeros((n, width), dtype=torch.long, device=device)
    for i, p in enumerate(prompts):
        ids[i, width - len(p) :] = torch.tensor(list(p), dtype=torch.long)
        attn[i, width - len(p) :] = 1
    positions = (attn.cumsum(-1) - 1).clamp(min=0)
    keep = {"logits_to_keep": 1} if keep_one_logit else {}  # no [n, P, V] prefill logits
    out = model(input_ids=ids, attention_mask=attn, position_ids=positions, use_cache=True, **keep)
    past = out.past_key_values
    logits = out.logits[:, -1, :].float()
    next_pos = attn.sum(-1, keepdim=True)
    rows = [RowResult([], [], False) for _ in range(n)]
    active = [m > 0 for m in max_new]
    for _ in range(max(max_new, default=0)):
        if not any(active):
            break
        scaled = logits / temperature
        for i, m in enumerate(matchers):
            if m is not None and active[i]:
                allowed = m.allowed().to(device)
                v = min(allowed.shape[0], scaled.shape[1])
                row = scaled[i]
                row[:v] = row[:v].masked_fill(~allowed[:v], float("-inf"))
                row[v:] = float("-inf")
        logp = torch.log_softmax(scaled, dim=-1)
        nxt = torch.full((n,), pad_id, dtype=torch.long, device=device)
        for i in range(n):
            if not active[i]:
                continue
            tok = int(torch.multinomial(logp[i].exp(), 1, generator=generators[i]))
            nxt[i] = tok
            r = rows[i]
            r.tokens.append(tok)
            r.logprobs.append(float(logp[i, tok]))
            m = matchers[i]
            if m is not None:
                m.accept(tok)
            r.finished = tok == eos_id
            if r.finished or len(r.tokens) >= max_new[i] or (m is not None and m.terminated):
                active[i] = False
        if not any(active):
            break
        attn = torch.cat([attn, torch.ones((n, 1), dtype=attn.dtype, device=device)], dim=1)
        out = model(
            input_ids=nxt[:, None],
            attention_mask=attn,
            position_ids=next_pos,
            past_key_values=past,
            use_cache=True,
        )
        next_pos = next_pos + 1
        past = out.past_key_values
        logits = out.logits[:, -1, :].float()
    return rows
