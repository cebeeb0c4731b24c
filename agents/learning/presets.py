"""Named settings of the learning presets: the papers' published values and the CPU preset.

``LearningConfig.settings`` picks one of these dictionaries; it fills every field the user did
not give (explicit ``--agent-config`` values win), and the resolved configuration is frozen into
``run.json`` together with the name. Sources: ``shared/notes/anchors-rl.md`` §1–2 (code read at
ThetaEvolve ``efcbe00ba327`` and TTT-Discover ``96df74ffa7c4``) and ``seed-ttt-discover.md`` §1.7
(the paper's Table 9). Every departure from a paper is listed in ``agents/learning/README.md``.
"""

from __future__ import annotations

import math
from typing import Any

THETAEVOLVE_PAPER: dict[str, Any] = {
    # slime's GRPO: (r - mean) / (torch.std + 1e-6), torch.std is Bessel-corrected.
    "estimator": "grpo",
    "grpo_ddof": 1,
    "eps_num": 1e-6,
    # --eps-clip 0.2 --eps-clip-high 0.28, --use-tis with tis_clip 2.0, no KL, no entropy bonus.
    "clip": True,
    "clip_eps_lo": 0.2,
    "clip_eps_hi": 0.28,
    "tis_cap": 2.0,
    "kl_mode": "none",
    "kl_coef": 0.0,
    # Per-sample token mean, averaged over the batch (seq-mean-token-mean).
    "loss_aggregation": "seq_mean",
    # Adam lr 1e-6 constant, weight decay 0.1, betas (0.9, 0.98), grad clip 1.0 (full-parameter
    # training there; a LoRA adapter here, see the README's departures).
    "lr": 1e-6,
    "adam_beta1": 0.9,
    "adam_beta2": 0.98,
    "weight_decay": 0.1,
    "max_grad_norm": 1.0,
    "policy_temperature": 1.0,
    # No prompt cut at GPU scale (rollout_max_response_len 16384 is for whole programs).
    "max_prompt_tokens": 16384,
    "policy_max_new_tokens": 1024,
}
"""ThetaEvolve (``run.sh`` / ``general.sh`` and slime's defaults as read)."""

TTT_DISCOVER_PAPER: dict[str, Any] = {
    # Entropic LOO advantage with beta solved for KL(q_beta || U) = ln 2; KL as advantage shaping.
    "estimator": "entropic",
    "gamma": math.log(2),
    "kl_mode": "shaping",
    "kl_coef": 0.1,
    # Tinker's importance_sampling loss: unclipped ratio, plain token sum.
    "clip": False,
    "tis_cap": None,
    "loss_aggregation": "token_sum",
    # Table 9: Adam lr 4e-5, betas (0.9, 0.95), eps 1e-8 (torch's default), LoRA rank 32.
    "lr": 4e-5,
    "adam_beta1": 0.9,
    "adam_beta2": 0.95,
    "weight_decay": 0.0,
    "lora_r": 32,
    "lora_alpha": 32,
    "policy_temperature": 1.0,
    "state_reuse": "puct",
    "puct_c": 1.0,
    "puct_children_per_parent": 2,
    "puct_capacity": 1000,
    "max_prompt_tokens": 16384,
    "policy_max_new_tokens": 1024,
}
"""TTT-Discover (paper Table 9, ``tinker_cookbook/recipes/ttt`` as read)."""

PACEVOLVE_PP_PAPER: dict[str, Any] = {"max_prompt_tokens": 16384, "policy_max_new_tokens": 1024}
"""PACEvolve++: its Table 1 (lr, rank, clip values) was lost in every copy read, so ``paper``
keeps the class defaults and only lifts the CPU prompt cut."""

MAXK_PAPER: dict[str, Any] = {"max_prompt_tokens": 16384, "policy_max_new_tokens": 1024}
"""Max@k (PKPO): no optimiser settings for this scaffold are published; as ``PACEVOLVE_PP_PAPER``."""

CPU_COMMON: dict[str, Any] = {"lr": 0.1, "lora_targets": ["lm_head"]}
"""CPU preset (``settings = cpu``, the default without a CUDA GPU): LoRA on the output head only
(r 8, alpha 16), Adam lr 0.1, 512-token prompts and 64 new tokens. A policy call's choice among a
few named options is a shift of its output distribution; the head's adapter makes that shift within
a CPU run's dozen steps (lr 1e-4 on ``q_proj``/``v_proj`` moved nothing in 24 steps, issue 22), and it
leaves the model's hidden states, and so its language, untouched. Measured on ``selftest-bandit-8``
by ``benchmarks/bench_learning_proof.py`` (README of ``agents/learning``)."""
