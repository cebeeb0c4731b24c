"""Build the trained policy's backend (transformers on CPU/GPU, or vLLM + peft on a GPU) and trainer."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from agents.rl.backends.base import PolicyBackend
from agents.rl.policy import SMOLLM2, TINY_RANDOM, LoadedPolicy, load_policy
from agents.rl.trainer import Trainer, TrainerConfig

from .config import LearningConfig
from .gpu_plan import GpuPlan, PolicyWork, policy_shape

CPU_ALTERNATIVE = 'on a CPU machine use the transformers sampler: --agent-config \'{"policy_backend": "hf"}\''


def cuda_available() -> bool:
    """Whether torch sees a usable CUDA device."""
    import torch

    return bool(torch.cuda.is_available())


def resolve_sampler(cfg: LearningConfig) -> tuple[str, str]:
    """The sampler (``hf`` or ``vllm``) and learner device for this machine.

    Raises:
        ValueError: If the configuration asks for a GPU path (vLLM or ``device = cuda``) that this
            machine cannot run; the message names the CPU alternative.
    """
    gpu = cuda_available()
    has_vllm = importlib.util.find_spec("vllm") is not None
    if cfg.device == "cuda" and not gpu:
        raise ValueError("device 'cuda' was asked for but torch sees no CUDA GPU; use device 'cpu' or 'auto'")
    device = "cuda" if (cfg.device == "cuda" or (cfg.device == "auto" and gpu)) else "cpu"
    if cfg.policy_backend == "vllm":
        if not gpu or not has_vllm:
            missing = "no CUDA GPU is visible" if not gpu else "the vllm package is not installed"
            raise ValueError(
                f"policy_backend 'vllm' needs a CUDA GPU and vLLM (pip install 'evobench[gpu]'), but "
                f"{missing}; {CPU_ALTERNATIVE}"
            )
        if device != "cuda":
            raise ValueError(
                "policy_backend 'vllm' needs the learner on the GPU too (device 'auto' or 'cuda')"
            )
        return "vllm", device
    if cfg.policy_backend == "auto" and gpu and has_vllm:
        return "vllm", device
    return "hf", device


def estimator_params(cfg: LearningConfig) -> dict[str, Any]:
    """Keyword arguments of the configured estimator."""
    name = cfg.estimator
    if name == "grpo":
        return {"eps": cfg.eps_num, "ddof": cfg.grpo_ddof}
    if name == "entropic":
        return {"gamma": cfg.gamma}
    if name in ("pkpo", "sloo_minus_one"):
        return {"k": cfg.k}
    if name == "phase_mix":
        return {
            "k": cfg.k,
            "eps_num": cfg.eps_num,
            "eps_skip": cfg.eps_skip,
            "skip_unused_branch": cfg.skip_unused_branch,
        }
    return {}


def _vllm_base(policy: LoadedPolicy, reference: str, work_dir: Path) -> str:
    """What vLLM loads as the base: the reference itself, or the de-quantised weights saved to disk."""
    path = Path(reference).expanduser()
    if reference not in (TINY_RANDOM, SMOLLM2) and not reference.endswith(".gguf"):
        return str(path) if path.is_dir() else reference
    target = work_dir / "base"
    if not (target / "config.json").is_file():
        policy.model.save_pretrained(target)
        policy.tokenizer.save_pretrained(target)
    return str(target)


def policy_work(cfg: LearningConfig) -> PolicyWork | None:
    """What the policy will do on a GPU (None: the learner runs on the CPU here).

    Raises:
        ValueError: If the configuration asks for a GPU path this machine cannot run.
        agents.learning.gpu_plan.GpuPlanError: If the policy's shape cannot be read.
    """
    sampler, device = resolve_sampler(cfg)
    if device != "cuda":
        return None
    assert cfg.advisor_model is not None  # validated by the config
    return PolicyWork(
        shape=policy_shape(cfg.advisor_model),
        lora_rank=cfg.lora_r,
        lora_targets=tuple(cfg.lora_targets),
        prompt_tokens=cfg.max_prompt_tokens,
        new_tokens=cfg.policy_max_new_tokens,
        micro_batch=cfg.micro_batch,
        concurrent=cfg.candidates_per_step(),
        vllm=sampler == "vllm",
    )


def build_backend(
    cfg: LearningConfig, seed: int, work_dir: Path, plan: GpuPlan | None = None
) -> tuple[PolicyBackend, LoadedPolicy, str]:
    """Load the policy and wrap it in the sampler this machine supports.

    With a GPU memory ``plan`` (``bench run`` makes one for a learner on a GPU), the learner's
    dtype and micro-batch and vLLM's ``gpu_memory_utilization`` are the plan's; vLLM's context
    holds the longest prompt plus the longest completion.

    Returns:
        The backend, the loaded policy (tokenizer, chat flag) and the sampler name.

    Raises:
        ValueError: If a GPU path was asked for and cannot run here (see :func:`resolve_sampler`).
        agents.rl.policy.PolicyLoadError: If the policy reference cannot be loaded.
    """
    from agents.rl.backends.hf import HFBackend, LoraSettings, OptimSettings  # torch: only when a run starts
    from agents.rl.loss import LossConfig

    sampler, device = resolve_sampler(cfg)
    assert cfg.advisor_model is not None  # validated by the config
    policy = load_policy(cfg.advisor_model, seed=seed, dtype=plan.learner_dtype if plan else "float32")
    base = _vllm_base(policy, cfg.advisor_model, work_dir) if sampler == "vllm" else ""
    learner = HFBackend(
        policy,
        lora=LoraSettings(r=cfg.lora_r, alpha=cfg.lora_alpha, target_modules=tuple(cfg.lora_targets)),
        optim=OptimSettings(
            lr=cfg.lr,
            betas=(cfg.adam_beta1, cfg.adam_beta2),
            weight_decay=cfg.weight_decay,
            max_grad_norm=cfg.max_grad_norm,
            micro_batch=plan.micro_batch if plan else cfg.micro_batch,
        ),
        loss=LossConfig(
            eps_lo=cfg.clip_eps_lo,
            eps_hi=cfg.clip_eps_hi,
            clip=cfg.clip,
            tis_cap=cfg.tis_cap,
            aggregation=cfg.loss_aggregation,
            kl_mode=cfg.kl_mode,
            kl_coef=cfg.kl_coef,
        ),
        device=device,
        seed=seed,
    )
    if sampler == "hf":
        return learner, policy, sampler
    from agents.rl.backends.vllm import VLLMBackend

    backend = VLLMBackend(
        learner,
        base_model=base,
        adapter_dir=work_dir / "adapters",
        max_model_len=cfg.max_prompt_tokens + cfg.policy_max_new_tokens,
        gpu_memory_utilization=plan.vllm_utilization
        if plan and plan.vllm_utilization
        else cfg.vllm_gpu_memory_utilization,
    )
    return backend, policy, sampler


def build_trainer(
    cfg: LearningConfig, backend: PolicyBackend, run_dir: Path, state_dir: Path, seed: int, total_steps: int
) -> Trainer:
    """The RL loop on ``backend``: ``train.parquet`` in ``run_dir``, checkpoints in ``state_dir``."""
    tc = TrainerConfig(
        estimator=cfg.estimator,
        estimator_params=estimator_params(cfg),
        alpha_start=cfg.alpha_start,
        alpha_end=cfg.alpha_end,
        total_steps=total_steps,
        group_size=max(2, cfg.group_size),
        temperature=cfg.policy_temperature,
        max_new_tokens=cfg.policy_max_new_tokens,
        checkpoint_every=1,
        keep_checkpoints=2,
        seed=seed,
    )
    return Trainer(backend, tc, run_dir, state_dir=state_dir)
