"""The learning agents' values of a score: the trained reward and the PUCT archive's rank.

Shared by the island scaffold (:mod:`agents.learning.agent`) and the same-state loop
(:mod:`agents.learning.state_loop`), which therefore need not import each other.
"""

from __future__ import annotations

import math

from agents.pacevolve.offline_exact import NAME as _EXACT_NAME
from harness.runner.context import TaskSpec
from harness.scoring.progress import progress_reward

from .config import LearningConfig
from .puct import MAX_ABS

EXACT_MODEL = f"offline/{_EXACT_NAME}"
"""The deterministic implementer whose input is ``edit <name> <n>``."""


def exact_edits(cfg: LearningConfig) -> bool:
    """Whether the advisor's hypotheses feed ``offline/exact`` (then they start with ``edit <name> <n>``)."""
    return cfg.target == "advisor" and (cfg.implementer_model or cfg.model) == EXACT_MODEL


def reward_of(cfg: LearningConfig, task: TaskSpec, score: float | None) -> float:
    """Progress-normalised reward of a score (``reward_fail`` for None or a non-finite score).

    Raises:
        ValueError: If the variant's progress bounds are degenerate (y_init == y_target).
    """
    return progress_reward(
        score,
        task.progress.y_init,
        task.progress.y_target,
        c=cfg.reward_c,
        alpha=cfg.reward_alpha,
        fail=cfg.reward_fail,
        y_min=cfg.reward_y_min,
        y_max=cfg.reward_y_max,
    )


def archive_value(task: TaskSpec, score: float | None) -> float:
    """The value PUCT ranks a program by: its raw score oriented so that higher is better.

    The reference code ranks raw values; the clamped progress reward would tie everything below
    ``y_init`` (and above ``y_target``). A failed program (None) gets ``-MAX_ABS``, below every
    real score; it is only ever a seed (failed children never enter the archive).
    """
    if score is None or not math.isfinite(score):
        return -MAX_ABS
    value = score if task.progress.y_target > task.progress.y_init else -score
    return min(MAX_ABS, max(-MAX_ABS, value))
