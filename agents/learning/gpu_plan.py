"""GPU memory plan of a learning run: where the policy (vLLM sampler + learner) and the evaluations go.

A learning run keeps three things on GPUs: vLLM (bf16 weights, KV cache, LoRA slots), the peft
learner (base weights in the learner's dtype, LoRA weights + gradients + Adam state, the
activations autograd keeps for one micro-batch) and, per evaluation, the trusted scorer, the
candidate and its echo. Nothing in CUDA shares memory fairly between processes, so the plan
decides it before anything starts (``docs/gpu-memory.md`` has the arithmetic for one H100):

* several GPUs: the policy gets the first (``cuda:0`` of the ``bench run`` process, where vLLM and
  the learner land by default) and evaluations the others (``EVOBENCH_AGENT_GPUS`` tells the
  harness to hand them out only from those);
* one GPU: an explicit budget: vLLM's ``gpu_memory_utilization`` sized to its needs, the learner
  in float32 when it fits (else fewer sequences per micro-batch, else bfloat16), and a per-process
  cap for the evaluation processes (``EVOBENCH_EVAL_GPU_FRACTION``, applied with
  ``torch.cuda.set_per_process_memory_fraction`` in the trusted scorer and the allocator's
  ``per_process_memory_fraction`` for the candidate);
* or a refusal that gives the numbers and the longest prompt that would fit.

All sizes are estimates from the model's shape (no GPU was available where this was written).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

GIB = 1024**3
LearnerDtype = Literal["float32", "bfloat16"]
DTYPE_BYTES: Mapping[str, int] = {"float32": 4, "bfloat16": 2}
HEADROOM = 0.05
"""Share of each GPU left unplanned (allocator fragmentation, NCCL / cuBLAS workspaces)."""
CONTEXT_BYTES = GIB // 2
"""One CUDA context with torch's kernels loaded, per process (≈ 500 MiB on Hopper, CUDA 12-13)."""
VLLM_OVERHEAD_BYTES = 2 * GIB
"""vLLM beyond weights and KV cache: its profiled activation peak, CUDA graphs, sampler buffers."""
LOGIT_COPIES = 3
"""Float32 [tokens, vocab] tensors the learner holds per completion token (logits, log-softmax, exp)."""


@dataclass(frozen=True)
class PolicyShape:
    """The sizes of a decoder-only transformer that fix its memory (from its ``config.json``)."""

    name: str
    """Model reference, for messages."""
    layers: int
    """``num_hidden_layers``."""
    hidden: int
    """``hidden_size``."""
    intermediate: int
    """``intermediate_size`` (SwiGLU MLP: gate, up and down projections)."""
    heads: int
    """``num_attention_heads``."""
    kv_heads: int
    """``num_key_value_heads``."""
    head_dim: int
    """``head_dim`` (``hidden_size / num_attention_heads`` where the config has none)."""
    vocab: int
    """``vocab_size``."""
    tied: bool
    """``tie_word_embeddings``: the output head reuses the embedding matrix."""

    @classmethod
    def from_config(cls, name: str, cfg: Any) -> PolicyShape:
        """Read a ``transformers`` config (``AutoConfig.from_pretrained``) of a Llama/Qwen-style model."""
        heads = int(cfg.num_attention_heads)
        head_dim = getattr(cfg, "head_dim", None) or int(cfg.hidden_size) // heads
        return cls(
            name, int(cfg.num_hidden_layers), int(cfg.hidden_size), int(cfg.intermediate_size), heads,
            int(getattr(cfg, "num_key_value_heads", None) or heads), int(head_dim), int(cfg.vocab_size),
            bool(getattr(cfg, "tie_word_embeddings", False)),
        )  # fmt: skip

    def module_dims(self) -> dict[str, tuple[int, int]]:
        """(in, out) features of each linear module a LoRA may target, per layer (``lm_head``: once)."""
        q, kv, h, i = (
            self.heads * self.head_dim,
            self.kv_heads * self.head_dim,
            self.hidden,
            self.intermediate,
        )
        return {
            "q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
            "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h), "lm_head": (h, self.vocab),
        }  # fmt: skip

    @property
    def params(self) -> int:
        """Parameter count: embeddings, layers (projections and norms), final norm, untied head."""
        dims = self.module_dims()
        per_layer = (
            sum(a * b for k, (a, b) in dims.items() if k != "lm_head") + 2 * self.hidden + 2 * self.head_dim
        )
        head = 0 if self.tied else self.vocab * self.hidden
        return self.vocab * self.hidden + self.layers * per_layer + self.hidden + head

    def lora_params(self, rank: int, targets: Sequence[str]) -> int:
        """Trainable parameters of a rank-``rank`` LoRA on ``targets`` (A: r x in, B: out x r)."""
        dims = self.module_dims()
        total = 0
        for t in targets:
            a, b = dims.get(t, (self.hidden, self.hidden))  # unknown names: a square projection
            total += rank * (a + b) * (1 if t == "lm_head" else self.layers)
        return total

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """KV cache of one token over all layers (keys and values)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes

    def activation_elements_per_token(self) -> int:
        """Elements autograd keeps per token and layer when gradients reach every layer (no checkpointing).

        Counted for a pre-norm Llama/Qwen layer with fused attention (no [L, L] scores): the two
        norms' inputs and outputs (4h), q / k / v before and after rotary (2q + 3kv, one v), the
        attention output (q), and the MLP's gate, up, activation and product (4i).
        """
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return 4 * self.hidden + 3 * q + 3 * kv + 4 * self.intermediate


QWEN3_4B = PolicyShape("Qwen/Qwen3-4B", 36, 2560, 9728, 32, 8, 128, 151936, True)
"""Qwen3-4B's ``config.json`` (4.02 B parameters)."""
SMOLLM2_135M = PolicyShape("smollm2-135m", 30, 576, 1536, 9, 3, 64, 49152, True)
"""SmolLM2-135M-Instruct's ``config.json`` (the ``smollm2-135m`` GGUF's base)."""
TINY_RANDOM_SHAPE = PolicyShape("tiny-random", 2, 32, 64, 4, 2, 8, 260, False)
"""``tiny-random``'s defaults (``agents/rl/policy.py``; byte vocabulary)."""


class GpuPlanError(ValueError):
    """The policy and the evaluations cannot share this machine's GPUs; the message has the numbers."""


def policy_shape(reference: str) -> PolicyShape:
    """The shape of a policy reference, from its ``config.json`` (no weights are loaded).

    Raises:
        GpuPlanError: If the reference is a GGUF file other than ``smollm2-135m`` (its shape is in
            the file's metadata, which is not read here), or its config cannot be read.
    """
    from agents.rl.policy import SMOLLM2, TINY_RANDOM

    if reference == SMOLLM2:
        return SMOLLM2_135M
    if reference == TINY_RANDOM:
        return TINY_RANDOM_SHAPE
    if reference.endswith(".gguf"):
        raise GpuPlanError(
            f"no GPU memory plan for the GGUF policy {reference}: give its HF model id or directory"
        )
    try:
        from transformers import AutoConfig

        cfg = AutoConfig.from_pretrained(reference)
    except (ImportError, OSError, ValueError) as e:
        raise GpuPlanError(f"cannot read the config of policy {reference!r} to plan GPU memory: {e}") from e
    return PolicyShape.from_config(reference, getattr(cfg, "text_config", cfg))


@dataclass(frozen=True)
class PolicyWork:
    """What the policy does on the GPU, from the agent's configuration."""

    shape: PolicyShape
    """The policy model."""
    lora_rank: int
    """LoRA rank (vLLM reserves its slot size, the next of 8, 16, 32, 64, ...)."""
    lora_targets: tuple[str, ...]
    """Modules with a LoRA adapter."""
    prompt_tokens: int
    """Longest prompt (``max_prompt_tokens``)."""
    new_tokens: int
    """Longest completion (``policy_max_new_tokens``)."""
    micro_batch: int
    """Sequences the learner back-propagates at once (``micro_batch``)."""
    concurrent: int
    """Sequences sampled at once (a step's rollout group), whose KV cache vLLM should hold."""
    keep_versions: int = 2
    """Adapter versions vLLM keeps loaded (``max_loras``)."""
    vllm: bool = True
    """Whether a vLLM engine samples (False: transformers samples with the learner's weights)."""

    def sampler_bytes(self) -> int:
        """The vLLM engine's minimum: bf16 weights, KV cache of ``concurrent`` sequences, LoRA, overhead."""
        if not self.vllm:
            return 0
        slot = next(s for s in (8, 16, 32, 64, 128, 256, 512) if s >= self.lora_rank)
        tokens = self.concurrent * (self.prompt_tokens + self.new_tokens)
        lora = self.keep_versions * self.shape.lora_params(slot, self.lora_targets) * 2
        return self.shape.params * 2 + tokens * self.shape.kv_bytes_per_token() + lora + VLLM_OVERHEAD_BYTES

    def learner_bytes(self, dtype: LearnerDtype, micro_batch: int) -> int:
        """The learner: base weights, LoRA weights + gradients + Adam moments (fp32), activations, logits."""
        s, b = self.shape, DTYPE_BYTES[dtype]
        tokens = micro_batch * (self.prompt_tokens + self.new_tokens)
        acts = tokens * s.layers * s.activation_elements_per_token() * b
        logits = micro_batch * self.new_tokens * s.vocab * 4 * LOGIT_COPIES
        lora = s.lora_params(self.lora_rank, self.lora_targets) * 16
        return s.params * b + lora + acts + logits + CONTEXT_BYTES


@dataclass(frozen=True)
class GpuPlan:
    """Where the policy and the evaluations run and with how much GPU memory."""

    agent_gpu: int
    """Host GPU number the policy (vLLM + learner) uses: ``cuda:0`` of the ``bench run`` process."""
    eval_gpus: tuple[int, ...]
    """Host GPU numbers evaluations are handed out from."""
    vllm_utilization: float | None
    """vLLM's ``gpu_memory_utilization`` (a share of the GPU's total memory); None: no vLLM."""
    learner_dtype: LearnerDtype
    """dtype of the learner's base weights (LoRA weights and optimiser state stay float32)."""
    micro_batch: int
    """Sequences per learner micro-batch (the gradient is the same; only memory changes)."""
    eval_fraction: float | None
    """Per-process cap of evaluation processes, a share of the GPU (None: they have GPUs of their own)."""
    lines: tuple[str, ...]
    """The decision and its numbers, for the run's log and ``run.json``."""

    def env(self) -> dict[str, str]:
        """Variables ``bench run`` sets before its workers start (read by ``harness.hardware.gpus``)."""
        out = {} if self.agent_gpu in self.eval_gpus else {"EVOBENCH_AGENT_GPUS": str(self.agent_gpu)}
        if self.eval_fraction is not None:
            out["EVOBENCH_EVAL_GPU_FRACTION"] = f"{self.eval_fraction:.4f}"
        return out


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def _settings(work: PolicyWork) -> list[tuple[LearnerDtype, int]]:
    """Learner settings to try, least change first: micro-batch only moves memory, bf16 moves numerics."""
    out: list[tuple[LearnerDtype, int]] = []
    dtypes: tuple[LearnerDtype, ...] = ("float32", "bfloat16")
    for dtype in dtypes:
        for mb in dict.fromkeys((work.micro_batch, 1)):
            out.append((dtype, mb))
    return out


def longest_prompt(fits: Callable[[PolicyWork], bool], work: PolicyWork) -> int:
    """The longest ``prompt_tokens`` (a multiple of 256, at most the configured) that ``fits``; 0: none."""
    lo, hi = 0, work.prompt_tokens // 256
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(_with_prompt(work, mid * 256)):
            lo = mid
        else:
            hi = mid - 1
    return lo * 256


def _with_prompt(work: PolicyWork, tokens: int) -> PolicyWork:
    return replace(work, prompt_tokens=tokens)


def plan_gpus(
    gpus: Mapping[int, int], work: PolicyWork, eval_bytes: int | None, eval_slots: int = 1
) -> GpuPlan:
    """Decide where the policy and the evaluations run (see the module docstring).

    Args:
        gpus: Host GPU number -> total memory in bytes, for the GPUs this run may use.
        work: What the policy does.
        eval_bytes: GPU memory one evaluation needs, its processes together (None: not declared;
            evaluations then get what the policy leaves).
        eval_slots: Evaluations running at once on a shared GPU (0: evaluations use no GPU of
            this machine: a CPU variant or a remote backend).

    Returns:
        The plan.

    Raises:
        GpuPlanError: No GPU, or the policy (and, on one GPU, the evaluations) cannot fit; the
            message gives every figure and the longest prompt that would fit.
    """
    if not gpus:
        raise GpuPlanError("the policy needs a CUDA GPU and none is visible")
    agent = min(gpus)
    total = gpus[agent]
    usable = total * (1 - HEADROOM)
    if eval_slots <= 0:  # evaluations use no GPU of this machine (CPU variant, remote backend)
        gpus = {agent: total}
    shared = len(gpus) == 1 and eval_slots > 0
    slots = max(eval_slots, 1)
    # on a shared GPU evaluations need at least their declared memory, and at least CUDA contexts
    evals = 0 if not shared else max(eval_bytes or 0, 3 * CONTEXT_BYTES) * slots

    def vllm_share(w: PolicyWork) -> float:
        """The vLLM budget as its setting: a share of the total in hundredths, rounded up."""
        return math.ceil(w.sampler_bytes() / total * 100) / 100 if w.vllm else 0.0

    def budget(w: PolicyWork) -> tuple[LearnerDtype, int, int] | None:
        for dtype, mb in _settings(w):
            learner = w.learner_bytes(dtype, mb)
            if learner + vllm_share(w) * total + evals <= usable:
                return dtype, mb, learner
        return None

    chosen = budget(work)
    sampler = work.sampler_bytes()
    if chosen is None:
        lightest = work.learner_bytes("bfloat16", 1)
        fit = longest_prompt(lambda w: budget(w) is not None, work)
        where = "its GPU" if not shared else f"the one GPU it shares with {max(eval_slots, 1)} evaluation(s)"
        raise GpuPlanError(
            f"{work.shape.name} does not fit {where}: {_gib(usable)} usable of {_gib(total)}; "
            f"vLLM needs {_gib(sampler)}, the learner "
            f"{_gib(work.learner_bytes('float32', work.micro_batch))} in float32 (micro-batch "
            f"{work.micro_batch}) or {_gib(lightest)} in bfloat16 (micro-batch 1), "
            f"evaluations {_gib(evals)} ({'declared' if eval_bytes else 'CUDA contexts only'}), for "
            f"{work.prompt_tokens} + {work.new_tokens} tokens. "
            + (f"It fits with max_prompt_tokens <= {fit}" if fit else "No prompt length fits")
            + ("" if not shared else "; or give the policy a GPU of its own (a second GPU)")
        )
    dtype, mb, learner = chosen
    lines = [
        f"policy {work.shape.name} on GPU {agent} ({_gib(total)}): learner {dtype}, micro-batch {mb}, "
        f"{_gib(learner)}; vLLM {_gib(sampler)}"
        if work.vllm
        else f"policy on GPU {agent}: {_gib(learner)}"
    ]
    if not shared:
        left = usable - learner
        util = math.floor(left / total * 100) / 100 if work.vllm else None
        others = tuple(sorted(set(gpus) - {agent}))
        lines.append(
            f"evaluations on GPUs {list(others)}, whole GPUs" if others else "evaluations use no GPU here"
        )
        return GpuPlan(agent, others, util, dtype, mb, None, tuple(lines))
    util = vllm_share(work) if work.vllm else None
    rest = usable - learner - (util or 0) * total
    fraction = math.floor(rest / slots / total * 1000) / 1000
    lines.append(
        f"evaluations share GPU {agent}: {_gib(rest)} left, each process capped at {fraction:.3f} "
        f"({_gib(fraction * total)})"
        + ("" if eval_bytes is None else f"; the variant declares {_gib(eval_bytes)} per evaluation")
    )
    return GpuPlan(agent, (agent,), util, dtype, mb, fraction, tuple(lines))
