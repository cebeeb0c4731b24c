"""The RL loop: rollout groups -> rewards -> group advantages -> one update -> log -> checkpoint.

One call of :meth:`Trainer.train_step` is one optimiser step (on-policy). Each prompt's ``n``
completions form one group for the estimator. A group the estimator answers with
:class:`~agents.rl.estimators.Skip` is dropped; when every group is dropped (PACEvolve++ has one
group per step) the update is skipped and logged with its reason. Rollout seeds derive from
``(seed, step)``, so a resumed run samples exactly what the uninterrupted run would have.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from agents.rl.backends.base import Completion, PolicyBackend
from agents.rl.diagnostics import TrainLog, TrainRow, summary
from agents.rl.estimators import ESTIMATORS, Skip, compute_advantages
from harness.results.atomic import atomic_write_json, fsync_dir

RewardFn = Callable[[Completion], float]
LATEST = "latest.json"


@dataclass(frozen=True)
class TrainerConfig:
    """Loop settings.

    Attributes:
        estimator: A key of :data:`agents.rl.estimators.ESTIMATORS`.
        estimator_params: Keyword arguments for it (``k``, ``eps``, ``beta``, ``gamma``, ...).
        alpha_start: ``phase_mix`` alpha at step 0.
        alpha_end: ``phase_mix`` alpha at the last step (linear ramp over ``total_steps``).
        total_steps: Planned number of steps (the ramp's length); None keeps ``alpha_start``.
        group_size: Completions per prompt.
        temperature: Sampling temperature (the learner uses the same).
        max_new_tokens: Generation cap.
        drop_constant_groups: Drop a group whose rewards are all equal before the estimator
            (TTT-Discover's ``remove_constant_reward_groups``): it has no signal, and left in,
            its tokens would still enter KL shaping and the loss's token count.
        checkpoint_every: Steps between checkpoints (a checkpoint also closes every run).
        keep_checkpoints: How many checkpoint directories to keep.
        seed: Base seed for rollouts.
    """

    estimator: str = "grpo"
    estimator_params: Mapping[str, Any] = field(default_factory=dict)
    alpha_start: float = 0.0
    alpha_end: float = 1.0
    total_steps: int | None = None
    group_size: int = 8
    temperature: float = 1.0
    max_new_tokens: int = 64
    drop_constant_groups: bool = True
    checkpoint_every: int = 1
    keep_checkpoints: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        """Validate.

        Raises:
            ValueError: If the estimator is unknown or a count/temperature is out of range.
        """
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {self.estimator!r}; choose one of {sorted(ESTIMATORS)}")
        if self.group_size < 2 or self.max_new_tokens < 1 or not self.temperature > 0:
            raise ValueError("need group_size >= 2, max_new_tokens >= 1 and temperature > 0")
        if self.checkpoint_every < 1 or self.keep_checkpoints < 1:
            raise ValueError("checkpoint_every and keep_checkpoints must be >= 1")
        if self.total_steps is not None and self.total_steps < 1:
            raise ValueError("total_steps must be >= 1")


class Trainer:
    """Drives a :class:`PolicyBackend` and writes ``train.parquet`` and checkpoints in ``run_dir``."""

    def __init__(
        self, backend: PolicyBackend, config: TrainerConfig, run_dir: Path, state_dir: Path | None = None
    ) -> None:
        """Set up (nothing is read until :meth:`resume`).

        Args:
            backend: The policy backend.
            config: Loop settings.
            run_dir: Where ``train.parquet`` is written.
            state_dir: Where ``checkpoints/`` and ``latest.json`` go (default: ``run_dir``).
        """
        self.backend = backend
        self.config = config
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.state_dir = Path(state_dir) if state_dir is not None else self.run_dir
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.log = TrainLog(self.run_dir)
        self.step = 0

    # ------------------------------------------------------------------ schedule
    def alpha(self) -> float:
        """The phase-mix alpha for the current step (linear ramp)."""
        c = self.config
        if c.total_steps is None or c.total_steps == 1:
            return c.alpha_start
        frac = min(1.0, self.step / (c.total_steps - 1))
        return c.alpha_start + (c.alpha_end - c.alpha_start) * frac

    # ------------------------------------------------------------------ loop
    def rollout(self, prompts: Sequence[Sequence[int]]) -> list[list[Completion]]:
        """Sample one group per prompt with the step's seed."""
        c = self.config
        return self.backend.sample(
            prompts, c.group_size, c.max_new_tokens, c.temperature, seed=c.seed * 1_000_003 + self.step
        )

    def train_step(self, prompts: Sequence[Sequence[int]], reward_fn: RewardFn) -> TrainRow:
        """Roll out, reward, update once, log and maybe checkpoint.

        Raises:
            ValueError: If a reward is not finite (the reward function must map failures to -1).
        """
        groups = self.rollout(prompts)
        rewards = [np.array([reward_fn(x) for x in g], dtype=np.float64) for g in groups]
        return self.update_on(groups, rewards)

    def update_on(self, groups: Sequence[Sequence[Completion]], rewards: Sequence[np.ndarray]) -> TrainRow:
        """Advantages, one update, a ``train.parquet`` row and a checkpoint for given rollouts (replay path).

        Raises:
            ValueError: If groups and rewards do not match or a reward is not finite.
        """
        return self.update_candidates([[[c] for c in g] for g in groups], rewards)

    def update_candidates(
        self, groups: Sequence[Sequence[Sequence[Completion]]], rewards: Sequence[np.ndarray]
    ) -> TrainRow:
        """Like :meth:`update_on`, for candidates made of several policy calls.

        ``groups[g][i]`` holds every completion that produced candidate ``i`` of group ``g``
        (e.g. an advisor's idea, classification and selection answers); the candidate's
        advantage is computed from the group's rewards and broadcast to all of its completions'
        tokens. A group with fewer than two candidates is skipped (no baseline exists).

        Raises:
            ValueError: If groups and rewards do not match or a reward is not finite.
        """
        t0 = time.perf_counter()
        if len(groups) != len(rewards):
            raise ValueError("one reward array per group is needed")
        params = dict(self.config.estimator_params)
        alpha = math.nan
        if self.config.estimator == "phase_mix":
            alpha = self.alpha()
            params["alpha"] = alpha
        batch: list[Completion] = []
        advs: list[float] = []
        reasons: list[str] = []
        for group, r in zip(groups, rewards, strict=True):
            r = np.asarray(r, dtype=np.float64)
            if r.shape != (len(group),) or not np.all(np.isfinite(r)):
                raise ValueError("rewards must be finite, one per candidate")
            if len(group) < 2:
                reasons.append(f"group of {len(group)} candidate(s): no baseline")
                continue
            if self.config.drop_constant_groups and r.max() == r.min():
                reasons.append(f"constant rewards ({r[0]:g}) in a group of {len(group)}")
                continue
            group_params = dict(params)
            if "k" in group_params:  # k <= N (a budget-cut group can be smaller than planned)
                group_params["k"] = min(int(group_params["k"]), len(group))
            a = compute_advantages(self.config.estimator, r, **group_params)
            if isinstance(a, Skip):
                reasons.append(a.reason)
                continue
            for calls, adv in zip(group, a, strict=True):
                batch.extend(calls)
                advs.extend(float(adv) for _ in calls)
        all_r = np.concatenate([np.asarray(r, dtype=np.float64) for r in rewards]) if rewards else np.zeros(0)
        adv_arr = np.asarray(advs, dtype=np.float64)
        if not batch:
            skip_reason = "; ".join(reasons) or "empty batch"
        elif not np.any(adv_arr != 0.0):
            skip_reason = "all advantages are zero"
        elif not any(len(x.token_ids) for x in batch):
            skip_reason = "no policy tokens"
        else:
            skip_reason = ""
        nan = math.nan
        loss = entropy = grad_norm = clip_frac = kl = gap = nan
        tokens = 0
        if not skip_reason:
            stats = self.backend.update(batch, advs, self.config.temperature)
            loss, entropy, grad_norm = stats.loss, stats.entropy, stats.grad_norm
            clip_frac, kl, gap, tokens = stats.clip_frac, stats.kl, stats.logprob_gap, stats.tokens
            if not stats.stepped:
                skip_reason = stats.skip_reason
        self.step += 1
        r_stats, a_stats = summary(all_r), summary(adv_arr)
        row = TrainRow(
            step=self.step, adapter_version=self.backend.adapter_version, loss=loss, entropy=entropy,
            grad_norm=grad_norm, clip_frac=clip_frac, kl=kl, alpha=alpha,
            adv_mean=a_stats[0], adv_std=a_stats[1], adv_min=a_stats[2], adv_max=a_stats[3],
            reward_mean=r_stats[0], reward_std=r_stats[1], reward_min=r_stats[2], reward_max=r_stats[3],
            skipped=bool(skip_reason), skip_reason=skip_reason, logprob_gap=gap, tokens=tokens,
            seconds=time.perf_counter() - t0,
        )  # fmt: skip
        self.log.append(row)
        if self.step % self.config.checkpoint_every == 0:
            self.checkpoint()
        return row

    # ------------------------------------------------------------------ checkpoints
    def checkpoint(self) -> Path:
        """Write adapter, optimiser and loop state; ``latest.json`` flips to it atomically.

        Returns:
            The checkpoint directory.

        Raises:
            OSError: If writing fails (the previous checkpoint stays the latest).
        """
        root = self.state_dir / "checkpoints"
        root.mkdir(exist_ok=True)
        final = root / f"step-{self.step:06d}"
        tmp = root / f".step-{self.step:06d}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        self.backend.save_state(tmp)
        atomic_write_json(
            tmp / "trainer.json",
            {
                "step": self.step,
                "adapter_version": self.backend.adapter_version,
                "config": _jsonable(self.config),
            },
        )
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        fsync_dir(root)
        atomic_write_json(self.state_dir / LATEST, {"step": self.step, "dir": final.name})
        kept = sorted(p for p in root.iterdir() if p.name.startswith("step-"))
        for old in kept[: -self.config.keep_checkpoints]:
            shutil.rmtree(old, ignore_errors=True)
        return final

    def resume(self) -> bool:
        """Restore the latest checkpoint of ``run_dir`` if any; rows logged after it are dropped.

        Returns:
            True if a checkpoint was restored.

        Raises:
            FileNotFoundError: If ``latest.json`` names a missing checkpoint.
            ValueError: If the checkpoint is unreadable.
        """
        latest = self.state_dir / LATEST
        if not latest.exists():
            self.log.load(upto_step=0)
            return False
        info = json.loads(latest.read_text())
        ckpt = self.state_dir / "checkpoints" / str(info["dir"])
        if not ckpt.is_dir():
            raise FileNotFoundError(f"checkpoint {ckpt} named by {latest} is missing")
        self._load(ckpt)
        return True

    def restore_step(self, step: int) -> None:
        """Go back to the state after ``step`` updates (0: the fresh adapter, already in place).

        Used when an agent's own checkpoint is older than the trainer's latest one (a crash
        between the two writes): the trainer rejoins the agent's step.

        Raises:
            FileNotFoundError: If no checkpoint of that step is kept.
            ValueError: If ``step`` is negative or the trainer has advanced past 0 with step 0 asked.
        """
        if step < 0:
            raise ValueError("step must be >= 0")
        if step == 0:
            if self.step != 0 or self.backend.adapter_version != 0:
                raise ValueError("cannot go back to step 0 once the adapter was updated in this process")
            self.log.load(upto_step=0)
            return
        ckpt = self.state_dir / "checkpoints" / f"step-{step:06d}"
        if not ckpt.is_dir():
            raise FileNotFoundError(f"no trainer checkpoint for step {step} in {ckpt.parent}")
        self._load(ckpt)

    def _load(self, ckpt: Path) -> None:
        state = json.loads((ckpt / "trainer.json").read_text())
        self.backend.load_state(ckpt, int(state["adapter_version"]))
        self.step = int(state["step"])
        self.log.load(upto_step=self.step)


def _jsonable(config: TrainerConfig) -> dict[str, Any]:
    d = asdict(config)
    d["estimator_params"] = dict(config.estimator_params)
    return d
