"""The GPU memory plan of a learning run: the arithmetic and the decision (issue 32 item 7)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.learning.gpu_plan import (
    CONTEXT_BYTES,
    GIB,
    HEADROOM,
    QWEN3_4B,
    GpuPlanError,
    PolicyShape,
    PolicyWork,
    plan_gpus,
)

H100 = 81559 * 1024 * 1024  # nvidia-smi's memory.total of an H100 SXM 80GB
TRIMUL = 40 * GIB  # trimul-h100's declared hardware.gpu_memory_gib


def headline(prompt: int = 8192, micro_batch: int = 4) -> PolicyWork:
    """README's headline run: pacevolve++ on trimul-h100 with Qwen3-4B, 8 islands, LoRA r 8 on q/v."""
    return PolicyWork(QWEN3_4B, 8, ("q_proj", "v_proj"), prompt, 1024, micro_batch, 8)


def test_qwen3_4b_sizes_from_its_config() -> None:
    cfg = SimpleNamespace(
        num_hidden_layers=36, hidden_size=2560, intermediate_size=9728, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, vocab_size=151936, tie_word_embeddings=True,
    )  # fmt: skip
    assert PolicyShape.from_config("Qwen/Qwen3-4B", cfg) == QWEN3_4B
    assert abs(QWEN3_4B.params - 4.022e9) < 1e6  # the model card's 4.0 B (3.6 B without embeddings)
    assert QWEN3_4B.kv_bytes_per_token() == 2 * 36 * 8 * 128 * 2 == 144 * 1024  # bf16 K and V
    assert QWEN3_4B.lora_params(8, ["q_proj", "v_proj"]) == 8 * ((2560 + 4096) + (2560 + 1024)) * 36
    assert QWEN3_4B.lora_params(8, ["lm_head"]) == 8 * (2560 + 151936)
    w = headline()
    # vLLM: 8.04 GB bf16 weights + 8 x 9216 tokens x 144 KiB of KV + 2 adapter slots + 2 GiB
    assert w.sampler_bytes() == 2 * QWEN3_4B.params + 8 * 9216 * 147456 + 2 * 2 * 2949120 + 2 * GIB
    # the learner keeps 64,512 activation elements per token and layer: 85 GiB per 9216 tokens in fp32
    acts = 9216 * 36 * 64512 * 4
    assert (
        w.learner_bytes("float32", 1)
        == 4 * QWEN3_4B.params + 16 * 2949120 + acts + 1024 * 151936 * 12 + CONTEXT_BYTES
    )


def test_one_h100_cannot_hold_the_headline_run_and_says_what_would() -> None:
    with pytest.raises(GpuPlanError) as e:
        plan_gpus({0: H100}, headline(), TRIMUL, 1)
    msg = str(e.value)
    assert "does not fit the one GPU it shares with 1 evaluation(s)" in msg and "a second GPU" in msg
    assert "40.0 GiB (declared)" in msg and "8192 + 1024 tokens" in msg
    fit = int(msg.split("max_prompt_tokens <= ")[1].split(";")[0])
    assert 0 < fit < 8192 and fit % 256 == 0
    plan = plan_gpus({0: H100}, headline(fit), TRIMUL, 1)  # the figure it gives does fit ...
    assert plan.eval_fraction is not None and plan.eval_fraction * H100 >= TRIMUL - 0.01 * H100
    with pytest.raises(GpuPlanError):  # ... and 256 tokens more does not
        plan_gpus({0: H100}, headline(fit + 256), TRIMUL, 1)


def test_two_h100s_give_the_policy_one_and_evaluations_the_other() -> None:
    plan = plan_gpus({3: H100, 5: H100}, headline(), TRIMUL, 1)
    assert (plan.agent_gpu, plan.eval_gpus, plan.eval_fraction) == (3, (5,), None)
    assert plan.env() == {"EVOBENCH_AGENT_GPUS": "3"}
    # float32 at 9216 tokens needs 97 GiB for one sequence: bfloat16, one sequence per micro-batch
    assert (plan.learner_dtype, plan.micro_batch) == ("bfloat16", 1)
    assert plan.vllm_utilization is not None and 0.2 < plan.vllm_utilization < 0.4
    small = plan_gpus({0: H100, 1: H100}, headline(512, micro_batch=2), TRIMUL, 1)
    assert (small.learner_dtype, small.micro_batch) == ("float32", 2)  # nothing changed when it fits


def test_a_cpu_variant_leaves_the_gpu_to_the_policy() -> None:
    plan = plan_gpus({0: H100, 1: H100}, headline(2048), None, 0)
    assert plan.eval_gpus == () and plan.eval_fraction is None and plan.env() == {"EVOBENCH_AGENT_GPUS": "0"}
    with pytest.raises(GpuPlanError, match="none is visible"):
        plan_gpus({}, headline(), None, 0)


@settings(max_examples=150, deadline=None)
@given(
    n_gpus=st.integers(1, 4),
    gib=st.sampled_from([40, 80, 94, 141]),
    prompt=st.integers(1, 64).map(lambda k: k * 256),
    micro_batch=st.integers(1, 8),
    need_gib=st.one_of(st.none(), st.integers(1, 80)),
    slots=st.integers(0, 3),
    vllm=st.booleans(),
)
def test_a_plan_never_commits_more_than_a_gpu_holds(
    n_gpus: int, gib: int, prompt: int, micro_batch: int, need_gib: int | None, slots: int, vllm: bool
) -> None:
    total = gib * GIB
    gpus = {i: total for i in range(n_gpus)}
    work = PolicyWork(QWEN3_4B, 8, ("q_proj", "v_proj"), prompt, 512, micro_batch, 8, vllm=vllm)
    need = None if need_gib is None else need_gib * GIB
    try:
        plan = plan_gpus(gpus, work, need, slots)
    except GpuPlanError as e:
        assert "does not fit" in str(e) and "GiB usable" in str(e)
        return
    usable = total * (1 - HEADROOM)
    learner = work.learner_bytes(plan.learner_dtype, plan.micro_batch)
    vllm_bytes = (plan.vllm_utilization or 0.0) * total
    assert plan.vllm_utilization is None or work.sampler_bytes() <= vllm_bytes  # vLLM gets what it needs
    if plan.eval_fraction is None:  # the policy alone on its GPU
        assert learner + vllm_bytes <= usable + 1e-6
        assert plan.agent_gpu not in plan.eval_gpus and len(plan.eval_gpus) == (n_gpus - 1 if slots else 0)
        return
    assert n_gpus == 1 and slots > 0 and plan.eval_gpus == (plan.agent_gpu,)
    evals = plan.eval_fraction * total * slots
    assert learner + vllm_bytes + evals <= usable + 1e-6
    assert evals >= (need or 0) * slots - 0.01 * total  # declared needs met, up to vLLM's rounding
    # the plan changes the learner only when it has to: float32 at the configured micro-batch if it fits
    cheap = (
        work.learner_bytes("float32", micro_batch)
        + math.ceil(work.sampler_bytes() / total * 100) / 100 * total
    )
    if cheap + max(need or 0, 3 * CONTEXT_BYTES) * slots <= usable:
        assert (plan.learner_dtype, plan.micro_batch) == ("float32", micro_batch)
