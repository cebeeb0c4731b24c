"""GPU tier: the vLLM sampler serves each learner update as a new LoRA version (skipped without CUDA/vLLM)."""

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.gpu
GAP = 0.1
"""Largest sampler/learner log-prob gap: vLLM serves LoRA in bf16 (fp16 on old GPUs), the learner fp32."""


@pytest.fixture
def vllm_backend(tmp_path):
    torch = pytest.importorskip("torch")
    if importlib.util.find_spec("vllm") is None or not torch.cuda.is_available():
        pytest.skip("needs vLLM and a CUDA GPU")
    from agents.rl.backends.hf import HFBackend, LoraSettings, OptimSettings
    from agents.rl.backends.vllm import VLLMBackend
    from agents.rl.policy import tiny_random

    policy = tiny_random(seed=0)
    base = tmp_path / "base"
    policy.model.save_pretrained(base)
    policy.tokenizer.save_pretrained(base)
    learner = HFBackend(policy, lora=LoraSettings(r=8, alpha=16), optim=OptimSettings(lr=0.05), device="cuda")
    return VLLMBackend(
        learner, str(base), tmp_path / "adapters", max_model_len=256, gpu_memory_utilization=0.3
    )


def _gap(backend, groups, temperature):
    flat = [c for g in groups for c in g]
    scored = backend.score(flat, temperature)
    return max(float(np.abs(np.array(c.logprobs) - s).max()) for c, s in zip(flat, scored, strict=True))


def test_versions_load_and_logprobs_match(vllm_backend):
    b = vllm_backend
    prompts = [[104, 105], [120, 121, 122]]
    for temperature in (1.0, 0.7):
        groups = b.sample(prompts, n=4, max_new_tokens=8, temperature=temperature, seed=0)
        assert _gap(b, groups, temperature) < GAP  # bf16 sampler, fp32 learner
    first = [c.token_ids for g in groups for c in g]
    for step in range(3):
        groups = b.sample(prompts, n=4, max_new_tokens=8, temperature=1.0, seed=step)
        stats = b.update([c for g in groups for c in g], [1.0, -1.0, 0.5, -0.5] * 2, 1.0)
        assert stats.stepped and b.adapter_version == step + 1
        assert b.lora_request().lora_name == f"policy-v{step + 1}"
        after = b.sample(prompts, n=4, max_new_tokens=8, temperature=1.0, seed=step)
        assert all(c.adapter_version == step + 1 for g in after for c in g)
        assert _gap(b, after, 1.0) < GAP
    assert len(b.loaded) <= b.keep_versions
    assert not (b.adapter_dir / "v000001").exists()
    again = [c.token_ids for g in b.sample(prompts, 4, 8, 0.7, 0) for c in g]
    assert again != first  # the served adapter changed the policy
