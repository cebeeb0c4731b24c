"""``bench run`` plans GPU memory for a learning agent's policy before its workers start (issue 32 item 7).

No GPU exists here: the GPU's presence (``cuda_available``) and ``nvidia-smi``'s memory table are
faked; the arithmetic is ``agents/learning/gpu_plan.py``'s, tested in ``tests/agents/learning``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agents.learning import policy_backend
from agents.learning.gpu_plan import GIB, GpuPlanError
from agents.registry import get_agent_class
from evobench.cli.run_plan import PlanError, gpu_memory_plan, resolve_workers
from harness.envs.registry import default_registry
from harness.hardware import gpus as hw_gpus

H100 = 81559 * 1024 * 1024


def _agent(**cfg: Any) -> Any:
    cls = get_agent_class("pacevolve++")
    base = {"advisor_model": "tiny-random", "implementer_model": "offline/exact", "policy_backend": "hf"}
    return cls(cls.Config.model_validate({**base, **cfg}))


@pytest.fixture
def two_h100s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_backend, "cuda_available", lambda: True)
    monkeypatch.setattr(hw_gpus, "gpu_memory_totals", lambda: {0: H100, 1: H100})
    monkeypatch.setattr(hw_gpus, "host_gpus", lambda *a, **k: [0, 1])


def test_a_learner_on_the_gpu_gets_its_own_and_evaluations_the_other(two_h100s: None) -> None:
    v = default_registry().get("trimul-h100")
    agent = _agent(device="cuda")
    env, lines = gpu_memory_plan(v, agent, "local", 0)
    assert env == {"EVOBENCH_AGENT_GPUS": "0"} and "evaluations on GPUs [1]" in lines[-1]
    assert agent.gpu_plan is not None and agent.run_summary()["gpu_plan"] == lines
    assert resolve_workers(v, "local", 0, env) == (1, "")  # one worker: the GPU the agent left
    # on Modal the evaluations have GPUs of their own: the policy keeps both here, nothing shared
    env, lines = gpu_memory_plan(v, _agent(device="cuda"), "modal", 0)
    assert env == {"EVOBENCH_AGENT_GPUS": "0"} and lines[-1] == "evaluations use no GPU here"


def test_one_gpu_is_shared_under_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(policy_backend, "cuda_available", lambda: True)
    monkeypatch.setattr(hw_gpus, "gpu_memory_totals", lambda: {0: H100})
    monkeypatch.setattr(hw_gpus, "host_gpus", lambda *a, **k: [0])
    env, lines = gpu_memory_plan(default_registry().get("trimul-h100"), _agent(device="cuda"), "local", 0)
    share = float(env["EVOBENCH_EVAL_GPU_FRACTION"])
    assert "EVOBENCH_AGENT_GPUS" not in env and share * H100 >= 40 * GIB  # trimul's declared 40 GiB
    assert "the variant declares 40.0 GiB per evaluation" in lines[-1]


def test_a_plan_that_cannot_fit_stops_the_run_before_anything_starts(
    two_h100s: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*a: Any) -> None:
        raise GpuPlanError("Qwen/Qwen3-4B does not fit its GPU: ...")

    agent = _agent(device="cuda")
    monkeypatch.setattr(agent, "plan_gpu_memory", refuse)
    with pytest.raises(PlanError, match="GPU memory plan: Qwen/Qwen3-4B does not fit"):
        gpu_memory_plan(default_registry().get("trimul-h100"), agent, "local", 0)


def test_no_plan_for_a_cpu_learner_or_an_agent_without_a_policy(two_h100s: None) -> None:
    v = default_registry().get("trimul-h100")
    assert gpu_memory_plan(v, _agent(device="cpu"), "local", 0) == ({}, [])
    assert gpu_memory_plan(v, get_agent_class("random-search")(), "local", 0) == ({}, [])


@pytest.mark.slow  # ~10 s: transformers' import and a save / load round trip
def test_the_learner_loads_in_the_planned_dtype(tmp_path: Path) -> None:
    import torch

    from agents.rl.policy import load_policy, tiny_random

    tiny = tiny_random(0)
    tiny.model.save_pretrained(tmp_path)
    tiny.tokenizer.save_pretrained(tmp_path)
    assert next(load_policy(str(tmp_path)).model.parameters()).dtype == torch.float32
    assert next(load_policy(str(tmp_path), dtype="bfloat16").model.parameters()).dtype == torch.bfloat16
