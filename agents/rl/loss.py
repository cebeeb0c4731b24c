"""Token-level policy loss: PPO clip with asymmetric bounds, truncated IS, KL, aggregation modes.

All functions work on padded ``[B, T]`` tensors with a 0/1 ``mask`` of policy tokens (prompt,
padding and non-policy tokens are 0). Aggregation is normalised by *batch-global* counts so
micro-batches can be summed: pass the whole update batch's ``total_tokens`` / ``total_seqs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

Aggregation = Literal["token_mean", "seq_mean", "token_sum"]
KLMode = Literal["none", "shaping", "loss"]
RatioRef = Literal["sampler", "learner"]


@dataclass(frozen=True)
class LossConfig:
    """Policy-loss settings.

    Attributes:
        eps_lo: Lower clip: ratio >= 1 - eps_lo (DAPO 0.2).
        eps_hi: Upper clip: ratio <= 1 + eps_hi (DAPO clip-higher 0.28).
        clip: False gives the unclipped importance-sampling loss (TTT-Discover / Tinker).
        ratio_ref: Denominator of the ratio: the sampler's log-probs, or the learner's own
            detached log-probs (ratio 1 with gradient; pair with ``tis_cap``).
        tis_cap: Truncated importance weight ``min(exp(learner - sampler), tis_cap)`` multiplied
            into each token's loss; None disables it.
        aggregation: ``token_mean`` (sum over the group's valid tokens / their count, DAPO and
            PACEvolve++ Eq. 6), ``seq_mean`` (mean over sequences of each token-mean), or
            ``token_sum`` (plain sum, TTT-Discover).
        kl_mode: ``shaping`` adds ``kl_coef * (mean d - d_t)`` to token advantages with
            ``d_t = sampler - base`` log-probs (TTT-Discover); ``loss`` adds ``kl_coef`` times the
            k3 estimator against the base model, aggregated like the policy loss.
        kl_coef: KL coefficient (lambda).
    """

    eps_lo: float = 0.2
    eps_hi: float = 0.28
    clip: bool = True
    ratio_ref: RatioRef = "sampler"
    tis_cap: float | None = None
    aggregation: Aggregation = "token_mean"
    kl_mode: KLMode = "none"
    kl_coef: float = 0.0

    def __post_init__(self) -> None:
        """Validate ranges.

        Raises:
            ValueError: If a bound or coefficient is out of range or a mode is unknown.
        """
        if not (0.0 <= self.eps_lo < 1.0 and self.eps_hi >= 0.0):
            raise ValueError("need 0 <= eps_lo < 1 and eps_hi >= 0")
        if self.tis_cap is not None and self.tis_cap <= 0:
            raise ValueError("tis_cap must be positive")
        if self.aggregation not in ("token_mean", "seq_mean", "token_sum"):
            raise ValueError(f"unknown aggregation {self.aggregation!r}")
        if self.kl_mode not in ("none", "shaping", "loss"):
            raise ValueError(f"unknown kl_mode {self.kl_mode!r}")
        if self.ratio_ref not in ("sampler", "learner"):
            raise ValueError(f"unknown ratio_ref {self.ratio_ref!r}")
        if self.kl_coef < 0:
            raise ValueError("kl_coef must be non-negative")


def aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, mode: Aggregation, total_tokens: int, total_seqs: int
) -> torch.Tensor:
    """Reduce ``[B, T]`` per-token values to a scalar, normalised by whole-batch counts.

    Raises:
        ValueError: If a count is not positive or the mode is unknown.
    """
    if total_tokens <= 0 or total_seqs <= 0:
        raise ValueError("total_tokens and total_seqs must be positive")
    masked = per_token * mask
    if mode == "token_mean":
        return masked.sum() / total_tokens
    if mode == "token_sum":
        return masked.sum()
    if mode == "seq_mean":
        lengths = mask.sum(dim=1).clamp(min=1)
        return (masked.sum(dim=1) / lengths).sum() / total_seqs
    raise ValueError(f"unknown aggregation {mode!r}")


def kl_shaped_advantages(
    advantages: torch.Tensor,
    sampler_logp: torch.Tensor,
    base_logp: torch.Tensor,
    mask: torch.Tensor,
    coef: float,
) -> torch.Tensor:
    """TTT-Discover KL shaping: ``A_t + coef * (mean d - d_t)``, ``d = sampler - base``, mean over the batch.

    Raises:
        ValueError: If the mask selects no token.
    """
    n = mask.sum()
    if n <= 0:
        raise ValueError("mask selects no token")
    d = (sampler_logp - base_logp) * mask
    d_bar = d.sum() / n
    return advantages + coef * (d_bar - d) * mask


@dataclass
class LossTerms:
    """The scalar loss (with grad) and detached per-batch sums for diagnostics."""

    loss: torch.Tensor
    clipped_tokens: float
    kl_sum: float


def policy_loss(
    logp: torch.Tensor,
    sampler_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    cfg: LossConfig,
    total_tokens: int,
    total_seqs: int,
    base_logp: torch.Tensor | None = None,
) -> LossTerms:
    """Clipped token-level policy loss for one micro-batch.

    Args:
        logp: Learner log-probs of the taken tokens at the sampling temperature (with grad).
        sampler_logp: Behaviour log-probs from the sampler.
        advantages: Per-token advantages (already shaped if ``kl_mode == "shaping"``).
        mask: 1 for policy tokens.
        cfg: Loss settings.
        total_tokens: Policy tokens in the whole update batch.
        total_seqs: Sequences in the whole update batch.
        base_logp: Base-model (adapter disabled) log-probs; needed when ``kl_mode == "loss"``.

    Returns:
        The loss and diagnostics sums.

    Raises:
        ValueError: If shapes differ or ``base_logp`` is missing for the KL loss.
    """
    if not (logp.shape == sampler_logp.shape == advantages.shape == mask.shape):
        raise ValueError("logp, sampler_logp, advantages and mask must share one shape")
    mask = mask.to(logp.dtype)
    denom = sampler_logp if cfg.ratio_ref == "sampler" else logp.detach()
    # The clamp only guards exp overflow on masked padding; valid log-ratios are far smaller.
    ratio = torch.exp(torch.clamp(logp - denom, -20.0, 20.0))
    unclipped = ratio * advantages
    if cfg.clip:
        clipped = torch.clamp(ratio, 1.0 - cfg.eps_lo, 1.0 + cfg.eps_hi) * advantages
        per_token = -torch.minimum(unclipped, clipped)
        is_clipped = ((advantages > 0) & (ratio > 1.0 + cfg.eps_hi)) | (
            (advantages < 0) & (ratio < 1.0 - cfg.eps_lo)
        )
    else:
        per_token = -unclipped
        is_clipped = torch.zeros_like(mask, dtype=torch.bool)
    if cfg.tis_cap is not None:
        weight = torch.clamp(torch.exp(torch.clamp(logp.detach() - sampler_logp, max=20.0)), max=cfg.tis_cap)
        per_token = per_token * weight
    loss = aggregate(per_token, mask, cfg.aggregation, total_tokens, total_seqs)
    kl_sum = 0.0
    if base_logp is not None:
        kl_sum = float(((logp.detach() - base_logp) * mask).sum())
    if cfg.kl_mode == "loss" and cfg.kl_coef > 0:
        if base_logp is None:
            raise ValueError("kl_mode='loss' needs base_logp")
        delta = torch.clamp(base_logp - logp, -20.0, 20.0)
        k3 = torch.exp(delta) - delta - 1.0
        loss = loss + cfg.kl_coef * aggregate(k3, mask, cfg.aggregation, total_tokens, total_seqs)
    return LossTerms(loss=loss, clipped_tokens=float((is_clipped.to(mask.dtype) * mask).sum()), kl_sum=kl_sum)
