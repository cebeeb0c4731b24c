import json

import numpy as np
import pandas as pd
import pytest

from agents.rl.diagnostics import COLUMNS
from agents.rl.trainer import Trainer, TrainerConfig


def reward_fn(c):
    # Reward: fraction of even token ids, a failure (-1) for an empty completion.
    return -1.0 if not c.token_ids else float(np.mean([t % 2 == 0 for t in c.token_ids]))


def make_trainer(make_backend, run_dir, **kw):
    cfg = TrainerConfig(
        estimator="phase_mix", estimator_params={"k": 2}, group_size=4, max_new_tokens=5, total_steps=5, **kw
    )
    return Trainer(make_backend(lr=0.05), cfg, run_dir)


def test_loop_writes_parquet_and_resumes(make_backend, tmp_path):
    prompts = [[1, 2, 3], [7, 8]]
    full = make_trainer(make_backend, tmp_path / "full")
    full.resume()
    rows_full = [full.train_step(prompts, reward_fn) for _ in range(4)]
    df = pd.read_parquet(tmp_path / "full" / "train.parquet")
    assert tuple(df.columns) == COLUMNS
    assert list(df["step"]) == [1, 2, 3, 4]
    assert df["alpha"].tolist() == pytest.approx([0.0, 0.25, 0.5, 0.75])
    assert (df["tokens"] > 0).all() and not df["skipped"].any()
    assert df["logprob_gap"].max() < 1e-5
    assert df["reward_min"].min() >= -1 and df["reward_max"].max() <= 1
    assert df["adapter_version"].tolist() == [1, 2, 3, 4]

    # A run killed after step 2 (checkpoint at 2, a row for step 3 written but no checkpoint).
    part = make_trainer(make_backend, tmp_path / "part", checkpoint_every=2)
    part.resume()
    for _ in range(3):
        part.train_step(prompts, reward_fn)
    assert json.loads((tmp_path / "part" / "latest.json").read_text())["step"] == 2
    resumed = make_trainer(make_backend, tmp_path / "part", checkpoint_every=2)
    assert resumed.resume() and resumed.step == 2
    assert resumed.backend.adapter_version == 2
    assert len(pd.read_parquet(tmp_path / "part" / "train.parquet")) == 2
    rows_resumed = [resumed.train_step(prompts, reward_fn) for _ in range(2)]
    df2 = pd.read_parquet(tmp_path / "part" / "train.parquet")
    assert list(df2["step"]) == [1, 2, 3, 4]
    # Same seeds, restored adapter and optimiser: steps 3-4 match the uninterrupted run.
    for a, b in zip(rows_full[2:], rows_resumed, strict=True):
        assert a.reward_mean == b.reward_mean
        assert a.loss == pytest.approx(b.loss, rel=1e-5, abs=1e-7)
        assert a.grad_norm == pytest.approx(b.grad_norm, rel=1e-4)


def test_collapsed_group_is_logged_as_skip(make_backend, tmp_path):
    trainer = make_trainer(make_backend, tmp_path, drop_constant_groups=False)
    before = {n: p.detach().clone() for n, p in trainer.backend.model.named_parameters() if p.requires_grad}
    row = trainer.train_step([[1, 2]], lambda c: -1.0)  # every candidate failed
    assert row.skipped and "collapsed" in row.skip_reason and np.isnan(row.loss) and row.tokens == 0
    assert trainer.backend.adapter_version == 0
    after = dict(trainer.backend.model.named_parameters())
    assert all((after[n] == before[n]).all() for n in before)
    df = pd.read_parquet(tmp_path / "train.parquet")
    assert df["skipped"].tolist() == [True] and df["reward_mean"].tolist() == [-1.0]


def test_zero_advantage_batch_is_skipped(make_backend, tmp_path):
    cfg = TrainerConfig(estimator="grpo", group_size=3, max_new_tokens=3, drop_constant_groups=False)
    trainer = Trainer(make_backend(), cfg, tmp_path)
    row = trainer.train_step([[1, 2]], lambda c: 2.0)
    assert row.skipped and row.skip_reason == "all advantages are zero"


@pytest.mark.parametrize("drop", [True, False])
def test_constant_entropic_group_never_moves_the_adapter(make_backend, tmp_path, drop):
    """Issue 22 item 4: entropic gave -1e-12 on a constant group, so KL shaping and Adam still ran."""
    cfg = TrainerConfig(estimator="entropic", group_size=4, max_new_tokens=3, drop_constant_groups=drop)
    trainer = Trainer(make_backend(lr=0.05), cfg, tmp_path)
    before = {n: p.detach().clone() for n, p in trainer.backend.model.named_parameters() if p.requires_grad}
    row = trainer.train_step([[1, 2], [3, 4]], lambda c: 0.25)
    reason = "constant rewards (0.25) in a group of 4" if drop else "all advantages are zero"
    assert row.skipped and reason in row.skip_reason and row.tokens == 0
    assert trainer.backend.adapter_version == 0
    after = dict(trainer.backend.model.named_parameters())
    assert all((after[n] == before[n]).all() for n in before)


def test_constant_group_is_dropped_and_the_others_still_train(make_backend, tmp_path):
    cfg = TrainerConfig(estimator="grpo", group_size=4, max_new_tokens=3)
    trainer = Trainer(make_backend(lr=0.05), cfg, tmp_path)
    groups = trainer.rollout([[1, 2], [3, 4]])
    rewards = [np.full(4, 1.0), np.array([0.0, 1.0, 0.0, 1.0])]
    row = trainer.update_on(groups, rewards)
    assert not row.skipped and row.tokens == sum(len(c.token_ids) for c in groups[1])


def test_bad_config_and_rewards_rejected(make_backend, tmp_path):
    with pytest.raises(ValueError):
        TrainerConfig(estimator="nope")
    with pytest.raises(ValueError):
        TrainerConfig(group_size=1)
    trainer = Trainer(make_backend(), TrainerConfig(group_size=2, max_new_tokens=2), tmp_path)
    with pytest.raises(ValueError):
        trainer.train_step([[1]], lambda c: float("nan"))
