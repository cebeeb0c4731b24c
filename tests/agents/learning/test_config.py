"""Presets, configuration checks and the sampler choice of the learning agents."""

from __future__ import annotations

import math

import pytest

from agents.learning.agent import PRESETS, planned_steps, reward_of
from agents.learning.config import (
    LearningConfig,
    MaxKConfig,
    PACEvolvePPConfig,
    ThetaEvolveConfig,
    TTTDiscoverConfig,
)
from agents.learning.policy_backend import estimator_params, resolve_sampler
from agents.registry import agent_ids, get_agent_class
from harness.envs.registry import default_registry
from harness.runner.context import Budget


def test_presets_are_registered_with_their_defaults() -> None:
    assert {"pacevolve", "pacevolve++", "thetaevolve", "ttt-discover", "maxk"} <= set(agent_ids())
    assert {cls.name for cls in PRESETS} == {"pacevolve++", "thetaevolve", "ttt-discover", "maxk"}
    pp, theta, ttt, maxk = PACEvolvePPConfig(), ThetaEvolveConfig(), TTTDiscoverConfig(), MaxKConfig()
    assert (pp.estimator, pp.clip_eps_lo, pp.clip_eps_hi, pp.kl_mode) == ("phase_mix", 0.2, 0.28, "none")
    assert (pp.alpha_start, pp.alpha_end, pp.state_reuse) == (0.0, 1.0, "scaffold")
    assert (theta.estimator, theta.clip_eps_hi, theta.kl_mode) == ("grpo", 0.2, "none")
    assert (ttt.estimator, ttt.clip, ttt.kl_mode, ttt.kl_coef, ttt.state_reuse) == (
        "entropic",
        False,
        "shaping",
        0.1,
        "puct",
    )
    assert ttt.puct_c == 1.0 and ttt.puct_children_per_parent == 2 and math.isclose(ttt.gamma, math.log(2))
    assert (maxk.estimator, maxk.k) == ("sloo_minus_one", 4)
    assert get_agent_class("pacevolve++").Config is PACEvolvePPConfig


def test_role_models_name_policy_and_implementer() -> None:
    cfg = PACEvolvePPConfig(advisor_model="tiny-random", implementer_model="offline/pacevolve")
    assert cfg.role_models() == {
        "advisor": "policy:tiny-random",
        "implementer": "offline/pacevolve",
        "summariser": "offline/pacevolve",
    }
    e2e = PACEvolvePPConfig(
        advisor_model="tiny-random", implementer_model="offline/pacevolve", target="end-to-end"
    )
    assert e2e.role_models()["implementer"] == "policy:tiny-random"
    agent = get_agent_class("maxk")(cfg)
    assert agent.llm_models() == {"implementer": "offline/pacevolve", "summariser": "offline/pacevolve"}


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"estimator": "nope"}, "unknown estimator"),
        ({"kl_mode": "shaping", "kl_coef": 0.0}, "kl_coef"),
        ({"reward_y_min": 0.0}, "both"),
        ({"reward_y_min": 1.0, "reward_y_max": 1.0}, "below"),
        ({"islands": 1}, "greater than or equal"),
        ({"advisor_model": ""}, "advisor_model"),
        ({"no_such_field": 1}, "Extra inputs"),
    ],
)
def test_bad_configs_are_rejected(overrides: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LearningConfig.model_validate(overrides)


def test_vllm_without_gpu_names_the_cpu_alternative(monkeypatch: pytest.MonkeyPatch) -> None:
    import agents.learning.policy_backend as pb

    monkeypatch.setattr(pb, "cuda_available", lambda: False)
    with pytest.raises(ValueError, match="policy_backend.*hf"):
        resolve_sampler(LearningConfig(policy_backend="vllm"))
    with pytest.raises(ValueError, match="no CUDA GPU"):
        resolve_sampler(LearningConfig(device="cuda"))
    assert resolve_sampler(LearningConfig()) == ("hf", "cpu")
    agent = get_agent_class("pacevolve++")(
        PACEvolvePPConfig(policy_backend="vllm", implementer_model="offline/x")
    )
    with pytest.raises(ValueError, match="transformers"):
        agent.preflight()


def test_preflight_rejects_a_missing_policy(tmp_path) -> None:
    cfg = PACEvolvePPConfig(
        advisor_model=str(tmp_path / "missing.gguf"), implementer_model="offline/pacevolve"
    )
    with pytest.raises(ValueError, match="GGUF file not found"):
        get_agent_class("pacevolve++")(cfg).preflight()
    cfg = PACEvolvePPConfig(advisor_model="not-a-model", implementer_model="offline/pacevolve")
    with pytest.raises(ValueError, match="neither"):
        get_agent_class("pacevolve++")(cfg).preflight()


def test_estimator_params_and_planned_steps() -> None:
    assert estimator_params(ThetaEvolveConfig(eps_num=1e-3)) == {"eps": 1e-3, "ddof": 0}
    assert estimator_params(ThetaEvolveConfig(settings="paper")) == {"eps": 1e-6, "ddof": 1}
    assert estimator_params(TTTDiscoverConfig())["gamma"] == pytest.approx(math.log(2))
    assert estimator_params(MaxKConfig(k=3)) == {"k": 3}
    assert set(estimator_params(PACEvolvePPConfig())) == {"k", "eps_num", "eps_skip", "skip_unused_branch"}

    class Ctx:
        budget = Budget(max_evaluations=41)

    assert planned_steps(PACEvolvePPConfig(islands=8), Ctx()) == 5  # type: ignore[arg-type]
    assert planned_steps(PACEvolvePPConfig(islands=8, total_steps=9), Ctx()) == 9  # type: ignore[arg-type]
    assert planned_steps(PACEvolvePPConfig(group="same-state", group_size=4, states_per_step=2), Ctx()) == 5  # type: ignore[arg-type]


def test_reward_is_progress_normalised_and_failures_are_minus_one() -> None:
    from harness.runner.runner import task_spec

    task = task_spec(default_registry().get("selftest-bandit"))
    cfg = PACEvolvePPConfig()
    assert reward_of(cfg, task, 1.0) == pytest.approx(5.0)
    assert reward_of(cfg, task, 0.5) == pytest.approx(2.5)
    assert reward_of(cfg, task, 7.0) == pytest.approx(5.0)  # clamped
    assert reward_of(cfg, task, None) == -1.0
    assert reward_of(cfg, task, float("nan")) == -1.0


def test_paper_settings_are_the_published_values_and_explicit_fields_win() -> None:
    """Issue 22 item 4: ThetaEvolve's and TTT-Discover's optimiser settings as named presets."""
    theta = ThetaEvolveConfig(settings="paper")
    assert (theta.grpo_ddof, theta.clip_eps_lo, theta.clip_eps_hi, theta.tis_cap) == (1, 0.2, 0.28, 2.0)
    assert (theta.lr, theta.adam_beta2, theta.weight_decay) == (1e-6, 0.98, 0.1)
    assert theta.loss_aggregation == "seq_mean"
    ttt = TTTDiscoverConfig(settings="paper")
    assert (ttt.lr, ttt.adam_beta1, ttt.adam_beta2, ttt.weight_decay) == (4e-5, 0.9, 0.95, 0.0)
    assert ttt.lora_r == 32
    assert (ttt.estimator, ttt.clip, ttt.loss_aggregation, ttt.kl_mode, ttt.kl_coef) == (
        "entropic", False, "token_sum", "shaping", 0.1,
    )  # fmt: skip
    assert ttt.max_prompt_tokens >= 8192  # the CPU cut removed the task statement
    # On a CPU learner the default is the CPU preset, and explicit values beat the named preset.
    cpu = ThetaEvolveConfig(device="cpu")
    assert cpu.settings == "cpu" and cpu.grpo_ddof == 0
    assert TTTDiscoverConfig.model_validate({"settings": "paper", "lr": 1e-3}).lr == 1e-3
    # The name and the resolved values are what run.json records (model_dump of the config).
    dumped = TTTDiscoverConfig(settings="paper").model_dump(mode="json")
    assert dumped["settings"] == "paper" and dumped["adam_beta2"] == 0.95
    with pytest.raises(ValueError):
        LearningConfig.model_validate({"settings": "gpu-maybe"})


def test_paper_optimiser_settings_reach_the_backend(tmp_path) -> None:
    from agents.learning.policy_backend import build_backend

    cfg = TTTDiscoverConfig(settings="paper", advisor_model="tiny-random", lora_targets=["q_proj"])
    backend, _, sampler = build_backend(cfg, seed=0, work_dir=tmp_path)
    assert sampler == "hf" or sampler == "vllm"
    learner = getattr(backend, "learner", backend)
    group = learner.optimizer.param_groups[0]
    assert group["betas"] == (0.9, 0.95) and group["lr"] == 4e-5 and group["weight_decay"] == 0.0
    assert learner.lora.r == 32


def test_lr_zero_is_the_frozen_baseline_and_negative_is_refused() -> None:
    cls = get_agent_class("pacevolve++")
    assert cls.Config.model_validate({"lr": 0.0}).lr == 0.0
    with pytest.raises(ValueError, match="lr"):
        cls.Config.model_validate({"lr": -1e-4})


def test_learning_summary_compares_first_and_last_quarter() -> None:
    from agents.learning.agent import learning_summary

    assert learning_summary([]) == {}
    assert learning_summary([math.nan]) == {}
    s = learning_summary([1.0, 2.0, math.nan, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])  # 8 finite: quarters of 2
    assert s["reward_first_quarter"] == 1.5 and s["reward_last_quarter"] == 7.5
    assert "1.500" in s["headline"] and "7.500" in s["headline"] and "8 steps" in s["headline"]
    one = learning_summary([2.0])
    assert one["reward_first_quarter"] == one["reward_last_quarter"] == 2.0


def test_auto_settings_follow_the_learner_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """``settings = auto`` resolves (and records) ``cpu`` on a CPU learner, ``paper`` on a GPU."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = PACEvolvePPConfig()
    assert cfg.settings == "cpu" and cfg.lora_targets == ["lm_head"] and cfg.lr == 0.1
    assert PACEvolvePPConfig(lr=1e-3).lr == 1e-3  # explicit values win over the preset
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    gpu = PACEvolvePPConfig()
    assert gpu.settings == "paper" and gpu.lr == 1e-4 and gpu.lora_targets == ["q_proj", "v_proj"]
    assert PACEvolvePPConfig(device="cpu").settings == "cpu"  # a CPU learner on a GPU machine
    assert TTTDiscoverConfig(settings="auto", device="cuda").lr == 4e-5
    # what run.json freezes is the resolved name, so a resumed run keeps its settings anywhere
    assert gpu.model_dump(mode="json")["settings"] == "paper"
    assert PACEvolvePPConfig.model_validate(gpu.model_dump(mode="json")).lr == 1e-4
