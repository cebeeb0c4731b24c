"""The synchronisation point of the scaffold loop, PUCT parents, same-state groups, resume bookkeeping."""

from __future__ import annotations

import json
import logging

import pandas as pd
import pytest

from agents.registry import get_agent_class

TINY = {
    "advisor_model": "tiny-random",
    "implementer_model": "offline/pacevolve",
    "islands": 4,
    "policy_max_new_tokens": 8,
    "max_prompt_tokens": 96,
    "lr": 0.05,
    "lora_r": 4,
    "lora_alpha": 8,
    "skip_repeats": False,
}


def make(agent: str, **overrides):
    cls = get_agent_class(agent)
    return cls(cls.Config.model_validate({**TINY, **overrides}))


def test_all_failure_group_is_skipped_and_logged(run_agent, caplog) -> None:
    # strict parsing: a random model never follows the answer format, so every iteration fails (R = -1)
    ag = make("pacevolve++", lenient_parsing=False, constrained_decoding=False, max_empty_steps=3)
    with caplog.at_level(logging.INFO):
        out, run_dir = run_agent(ag, "selftest-bandit", max_evaluations=20)
    train = pd.read_parquet(run_dir / "train.parquet")
    assert len(train) == 3 and train["skipped"].all()
    assert (train["reward_mean"] == -1.0).all()
    assert train["skip_reason"].str.contains("constant rewards").all()
    assert train["adapter_version"].max() == 0
    msgs = [r.getMessage() for r in caplog.records]
    assert any("update skipped" in m and "constant rewards" in m for m in msgs)
    assert out.info.agent_summary["skipped_updates"] == 3
    assert out.info.agent_summary["adapter_version"] == 0


def test_ttt_discover_takes_parents_from_puct_and_checkpoints_the_archive(run_agent) -> None:
    out, run_dir = run_agent(make("ttt-discover"), "selftest-bandit", max_evaluations=13)
    iters = pd.read_parquet(run_dir / "pacevolve_iterations.parquet")
    assert set(iters["parent_source"]) == {"puct"}
    ckpt = json.loads((run_dir / "checkpoints" / "agent").read_text())["state"]
    archive = json.loads(ckpt["learning"]["puct"])
    assert archive  # the PUCT buffer travels with the scaffold state
    train = pd.read_parquet(run_dir / "train.parquet")
    assert ckpt["learning"]["trainer_step"] == len(train)
    updated = train[~train["skipped"]]
    assert len(updated) >= 1 and updated["kl"].notna().all()  # KL shaping is reported on every update
    lb = pd.read_parquet(run_dir.parent.parent / "lb" / "selftest_bandit.parquet")
    row = lb.iloc[-1]
    assert json.loads(row["models_json"])["advisor"] == "policy:tiny-random"
    assert row["adapter_version"] == train["adapter_version"].iloc[-1]


@pytest.mark.parametrize("target", ["advisor", "end-to-end"])
def test_same_state_groups(run_agent, target: str) -> None:
    ag = make(
        "thetaevolve", group="same-state", group_size=4, states_per_step=2, target=target, max_empty_steps=2
    )
    out, run_dir = run_agent(ag, "selftest-bandit", max_evaluations=17)
    assert out.info.status == "finished"
    train = pd.read_parquet(run_dir / "train.parquet")
    assert len(train) >= 1
    if target == "end-to-end":  # a random model writes no applicable edit: two empty steps end the run
        assert len(train) == 2
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    policy = calls[calls["kind"] == "trainable policy"]
    role = "advisor" if target == "advisor" else "implementer"
    assert set(policy["role"]) == {role}
    # eight samples per step (two states x four), every one filed for the update
    assert policy.groupby("step").size().eq(8).all()
    ckpt = json.loads((run_dir / "checkpoints" / "agent").read_text())["state"]
    assert ckpt["trainer_step"] == len(train)


def test_trainer_rejoins_an_older_scaffold_checkpoint(tmp_path) -> None:
    import numpy as np

    from agents.rl.backends.hf import HFBackend, LoraSettings
    from agents.rl.policy import encode_prompt, tiny_random
    from agents.rl.trainer import Trainer, TrainerConfig

    policy = tiny_random()
    backend = HFBackend(policy, lora=LoraSettings(r=4, alpha=8))
    trainer = Trainer(
        backend, TrainerConfig(estimator="grpo", max_new_tokens=4), tmp_path, state_dir=tmp_path / "s"
    )
    prompt = [encode_prompt(policy, "abc")]
    for _ in range(3):
        groups = trainer.rollout(prompt)
        trainer.update_on(groups, [np.arange(len(groups[0]), dtype=float)])
    assert trainer.step == 3 and backend.adapter_version == 3
    fresh = HFBackend(tiny_random(), lora=LoraSettings(r=4, alpha=8))
    again = Trainer(
        fresh, TrainerConfig(estimator="grpo", max_new_tokens=4), tmp_path, state_dir=tmp_path / "s"
    )
    again.restore_step(2)  # the agent's checkpoint was written after step 2; the trainer had reached 3
    assert again.step == 2 and fresh.adapter_version == 2
    assert [r["step"] for r in again.log.rows] == [1, 2]
    with pytest.raises(FileNotFoundError, match="no trainer checkpoint for step 1"):
        again.restore_step(1)  # only the last two are kept
