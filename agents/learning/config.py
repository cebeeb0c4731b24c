"""Configuration of the learning agents: one model, four presets (notes ``seed-pacevolve-pp.md`` §2).

Every knob the papers leave open (Table 1 of PACEvolve++ was lost) is a field here, and the
resolved configuration is frozen into ``run.json``. The presets differ only in their defaults:

| preset | estimator | clip (lo/hi) | KL | state reuse |
|---|---|---|---|---|
| ``pacevolve++`` | ``phase_mix`` (alpha linear 0 -> 1, k = 4) | DAPO 0.2 / 0.28 | none | scaffold |
| ``thetaevolve`` | ``grpo`` | 0.2 / 0.2 | none | scaffold |
| ``ttt-discover`` | ``entropic`` (adaptive beta, ln 2) | none (IS, token sum) | shaping 0.1 | PUCT c = 1 |
| ``maxk`` | ``sloo_minus_one`` (k = 4) | 0.2 / 0.28 | none | scaffold |
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from agents.pacevolve.config import PACEvolveConfig
from agents.rl.estimators import ESTIMATORS

from .presets import CPU_COMMON, MAXK_PAPER, PACEVOLVE_PP_PAPER, THETAEVOLVE_PAPER, TTT_DISCOVER_PAPER

Target = Literal["advisor", "end-to-end"]
GroupMode = Literal["across-islands", "same-state"]
StateReuse = Literal["scaffold", "puct"]
SamplerBackend = Literal["auto", "hf", "vllm"]
Settings = Literal["auto", "cpu", "paper"]


def _learner_on_gpu(device: object) -> bool:
    """Whether the learner will run on a CUDA GPU (``device`` field: ``auto``, ``cpu``, ``cuda``)."""
    if device == "cpu":
        return False
    if device == "cuda":
        return True
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


class LearningConfig(PACEvolveConfig):
    """A PACEvolve scaffold whose advisor (or, end to end, whole policy) is trained online by RL."""

    PAPER: ClassVar[dict[str, Any]] = {}
    """Field values of the preset's source paper (``settings = paper``); see ``presets.py``."""
    CPU: ClassVar[dict[str, Any]] = {}
    """Field values of the CPU preset (``settings = cpu``) that differ from the class defaults."""

    settings: Settings = "auto"
    """Named set of defaults for the fields not given explicitly: ``cpu`` (what moves a small
    policy within a CPU run's budget: a larger learning rate, LoRA on the output head, short
    prompts) or ``paper`` (the source paper's published optimiser and loss settings, GPU scale;
    departures in ``agents/learning/README.md``). ``auto`` picks ``cpu`` when the learner runs on
    the CPU (``device = cpu``, or ``auto`` without a CUDA GPU) and ``paper`` otherwise; the
    resolved name (never ``auto``) and values are frozen into ``run.json``."""

    advisor_rule: Literal["policy", "bandit-ucb"] = "policy"
    """Who answers the advisor stages: ``policy`` (the network ``advisor_model``, trained online) or
    ``bandit-ucb``, the non-learning adaptive baseline (``agents/learning/bandit.py``): UCB1 over the
    offered edit families with the same scaffold, implementer and rewards. It learns NO weights and
    loads no model; ``advisor_model`` and the optimiser and policy fields are then unused."""
    bandit_c: float = Field(default=1.0, ge=0.0)
    """``bandit-ucb``'s exploration coefficient c (index: mean + c * sqrt(2 ln N / n), rewards
    scaled to [0, 1])."""
    bandit_menu: list[str] = Field(default_factory=list)
    """``bandit-ucb``'s arms when the prompt offers no edit vocabulary (hypothesis texts, e.g. for
    ``selftest-bandit``, where the implementer writes the hypothesis into the program); empty:
    such an iteration fails."""
    model: str = "gemini/gemini-2.5-pro"
    """litellm model of the frozen roles (implementer and summariser unless overridden)."""
    advisor_model: str | None = "smollm2-135m"
    """The trainable policy: ``tiny-random``, ``smollm2-135m``, a ``.gguf`` file, a directory or an
    HF id (offline cache)."""
    implementer_model: str | None = None
    """litellm model (or ``offline/pacevolve``) that turns hypotheses into code (target
    ``advisor``); defaults to ``model``."""
    summariser_model: str | None = None
    """litellm model for idea summaries; defaults to the implementer's model."""

    islands: int = Field(default=8, ge=2)
    """Search threads; each proposes one candidate per step, and the step's candidates form the
    rollout group (``group = across-islands``)."""
    ideas_per_generation: int = Field(default=1, ge=1)
    """Ideas the advisor brainstorms per iteration (each is then classified: one policy call each)."""

    target: Target = "advisor"
    """What the policy writes: ``advisor`` (hypotheses; a frozen implementer writes the code, the
    seeds' setting) or ``end-to-end`` (the policy also writes the code, as the original
    ThetaEvolve and TTT-Discover did)."""
    group: GroupMode = "across-islands"
    """Rollout group: the step's candidates across islands (PACEvolve++), or ``group_size``
    samples from each of ``states_per_step`` states (``same-state``, the originals)."""
    group_size: int = Field(default=8, ge=2)
    """Samples per state (``same-state`` only)."""
    states_per_step: int = Field(default=1, ge=1)
    """States expanded per step (``same-state`` only; one group each)."""
    state_reuse: StateReuse = "scaffold"
    """Parent choice: the scaffold's own (working best, backtracking, crossover) or TTT-Discover's
    PUCT over all scored programs (lineage blocked within a step)."""
    puct_c: float = Field(default=1.0, ge=0.0)
    """PUCT exploration coefficient (TTT-Discover: 1.0)."""
    puct_children_per_parent: int = Field(default=2, ge=1)
    """Children kept per expanded parent at the end of a step (TTT-Discover: 2)."""
    puct_capacity: int = Field(default=1000, ge=1)
    """Archive size (TTT-Discover: 1000; initial states are never evicted)."""

    estimator: str = "phase_mix"
    """Advantage estimator (``agents.rl.estimators``)."""
    k: int = Field(default=4, ge=2)
    """Subset size of ``sloo_minus_one`` / ``pkpo`` / ``phase_mix`` (clamped to the group size)."""
    eps_num: float = Field(default=1e-6, gt=0.0)
    """epsilon added to standard deviations (GRPO, per-branch standardisation)."""
    eps_skip: float = Field(default=1e-8, ge=0.0)
    """A weighted ``phase_mix`` branch whose std falls below this skips the update."""
    skip_unused_branch: bool = False
    """Also skip when a ``phase_mix`` branch with weight 0 collapsed (the paper is ambiguous)."""
    gamma: float = Field(default=math.log(2), gt=0.0)
    """Entropic KL target gamma for the adaptive beta (TTT-Discover: ln 2)."""
    alpha_start: float = Field(default=0.0, ge=0.0, le=1.0)
    """``phase_mix`` alpha at the first step."""
    alpha_end: float = Field(default=1.0, ge=0.0, le=1.0)
    """``phase_mix`` alpha at the last planned step (linear ramp)."""
    total_steps: int | None = Field(default=None, ge=1)
    """Planned steps (the alpha ramp's length); None: from the evaluation budget."""

    clip: bool = True
    """PPO-style clipped ratio; False: unclipped importance sampling (TTT-Discover)."""
    clip_eps_lo: float = Field(default=0.2, ge=0.0, lt=1.0)
    """Lower clip bound 1 - eps_lo."""
    clip_eps_hi: float = Field(default=0.28, ge=0.0)
    """Upper clip bound 1 + eps_hi (DAPO clip-higher 0.28)."""
    loss_aggregation: Literal["token_mean", "seq_mean", "token_sum"] = "token_mean"
    """Loss aggregation over the group's advisor tokens (PACEvolve++ Eq. 6: token mean)."""
    kl_mode: Literal["none", "shaping", "loss"] = "none"
    """KL to the base policy: none, advantage shaping (TTT-Discover) or a k3 loss term."""
    kl_coef: float = Field(default=0.0, ge=0.0)
    """KL coefficient lambda (TTT-Discover: 0.1; 0.01 for algorithm engineering)."""
    tis_cap: float | None = Field(default=None, gt=0.0)
    """Truncated importance weight cap against sampler/learner mismatch (None: off)."""

    lr: float = Field(default=1e-4, ge=0.0)
    """AdamW learning rate of the LoRA adapter. 0 turns updates off: the frozen baseline of the same
    advisor (it samples, is scored and logged exactly like the trained one, its adapter never moves)."""
    adam_beta1: float = Field(default=0.9, ge=0.0, lt=1.0)
    """Adam beta1."""
    adam_beta2: float = Field(default=0.999, ge=0.0, lt=1.0)
    """Adam beta2 (TTT-Discover: 0.95; ThetaEvolve: 0.98)."""
    weight_decay: float = Field(default=0.0, ge=0.0)
    """Decoupled weight decay (ThetaEvolve: 0.1; TTT-Discover: none)."""
    grpo_ddof: Literal[0, 1] = 0
    """``grpo`` std: 0 = population std (the GRPO paper), 1 = Bessel (``torch.std``, ThetaEvolve)."""
    lora_r: int = Field(default=8, ge=1)
    """LoRA rank."""
    lora_alpha: int = Field(default=16, ge=1)
    """LoRA alpha."""
    lora_targets: list[str] = Field(default_factory=lambda: ["q_proj", "v_proj"], min_length=1)
    """Modules that get LoRA adapters (peft ``target_modules``; e.g. add ``lm_head``)."""
    max_grad_norm: float = Field(default=1.0, gt=0.0)
    """Gradient-norm clip."""
    micro_batch: int = Field(default=4, ge=1)
    """Sequences per learner forward/backward."""
    policy_temperature: float = Field(default=1.0, gt=0.0, le=2.0)
    """Sampling temperature of the trained policy (PACEvolve++: 1; the learner uses the same).
    At most 2: vLLM's ``SamplingParams`` rejects more, and ``auto`` may pick vLLM."""
    policy_max_new_tokens: int = Field(default=64, ge=1)
    """Tokens the policy may write per call (``end-to-end`` code calls get four times as many)."""
    max_prompt_tokens: int = Field(default=512, ge=16)
    """Prompt tokens kept per policy call: longer prompts lose their middle (head and tail stay).
    The default suits a CPU (the learner back-propagates through every prompt token); raise it on
    a GPU so the advisor sees the whole program and idea pool."""
    lenient_parsing: bool = True
    """When the policy breaks an answer format, read the whole answer as the idea / hypothesis
    instead of failing the iteration (small advisors rarely follow formats at first; the
    fallback is counted in ``advisor_fallbacks``). False: a broken format is a failure (R = -1)."""
    constrained_decoding: bool = True
    """Decode every policy answer under its stage's format (a regex from ``answer_formats.py``,
    applied by xgrammar on both the ``hf`` and ``vllm`` samplers and replayed by the learner), so
    a small policy writes parsable answers; with the ``offline/exact`` implementer hypotheses
    start with ``edit <name> <n>`` from the prompt's vocabulary. An answer cut off by
    ``policy_max_new_tokens`` can still break the format (then ``lenient_parsing`` applies).
    The parse rate per stage is in ``run.json`` (``agent_summary.parse_rate``)."""
    batch_policy_calls: bool = True
    """Serve the islands' concurrent policy calls of a step's draft phase as one batch per round
    (a lockstep session; every island drafts on its own thread). Rows keep their own seeds;
    false samples each call alone (the same answers up to float rounding)."""
    policy_backend: SamplerBackend = "auto"
    """Sampler: ``hf`` (transformers, CPU or one GPU), ``vllm`` (GPU), ``auto`` (vLLM when a CUDA
    GPU and vLLM are present, else transformers)."""
    policy_threads: int = Field(default=2, ge=1)
    """torch's CPU threads for the policy (sampling and learning). Fixed rather than taken from the
    machine because float reductions, and so a seeded run's samples, depend on the thread count;
    recorded in ``run.json`` with the rest of the configuration."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Learner device (``auto``: CUDA when available)."""
    vllm_gpu_memory_utilization: float = Field(default=0.45, gt=0.0, lt=1.0)
    """Fraction of GPU memory vLLM may take (the learner needs the rest)."""

    reward_c: float = Field(default=5.0, gt=0.0)
    """Progress reward scale c (R = c * u(y)^alpha_r; PACEvolve++: 5)."""
    reward_alpha: float = Field(default=1.0, gt=0.0)
    """Progress reward exponent alpha_r (PACEvolve++: 1)."""
    reward_fail: float = -1.0
    """Reward of a failed, unparsable or non-finite candidate, or of an iteration without one."""
    reward_y_min: float | None = None
    """Explicit lower score bound (with ``reward_y_max``); default: the variant's progress bounds."""
    reward_y_max: float | None = None
    """Explicit upper score bound."""

    @model_validator(mode="before")
    @classmethod
    def _apply_settings(cls, data: Any) -> Any:
        """Fill the fields not given explicitly from the named preset (explicit values win)."""
        if not isinstance(data, dict):
            return data
        name = data.get("settings", "auto")
        if name == "auto":
            name = "paper" if _learner_on_gpu(data.get("device", "auto")) else "cpu"
        preset = cls.PAPER if name == "paper" else cls.CPU if name == "cpu" else {}
        return {**preset, **data, "settings": name}

    @model_validator(mode="after")
    def _check(self) -> LearningConfig:
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"unknown estimator {self.estimator!r}; choose one of {sorted(ESTIMATORS)}")
        if (self.reward_y_min is None) != (self.reward_y_max is None):
            raise ValueError("give both reward_y_min and reward_y_max, or neither")
        if self.reward_y_min is not None and self.reward_y_max is not None:
            if not self.reward_y_min < self.reward_y_max:
                raise ValueError("reward_y_min must be below reward_y_max")
        if self.kl_mode != "none" and self.kl_coef <= 0:
            raise ValueError(f"kl_mode {self.kl_mode!r} needs kl_coef > 0")
        if not self.advisor_model:
            raise ValueError("advisor_model (the trainable policy) is required")
        if self.advisor_rule != "policy" and (self.group != "across-islands" or self.target != "advisor"):
            raise ValueError(
                f"advisor_rule {self.advisor_rule!r} needs group 'across-islands' and target 'advisor'"
            )
        return self

    @property
    def bandit(self) -> bool:
        """Whether a rule (``bandit-ucb``), not a trained policy, answers the advisor stages."""
        return self.advisor_rule != "policy"

    def role_models(self) -> dict[str, str]:
        """Role -> model: the advisor is the policy (a bandit: ``rule:<name>``), then the others."""
        implementer = self.implementer_model or self.model
        roles = {
            "advisor": f"rule:{self.advisor_rule}" if self.bandit else f"policy:{self.advisor_model}",
            "implementer": implementer,
            "summariser": self.summariser_model or implementer,
        }
        if self.target == "end-to-end":
            roles["implementer"] = roles["advisor"]
        return roles

    def candidates_per_step(self) -> int:
        """Candidates one step proposes (the rollout batch)."""
        if self.group == "same-state":
            return self.group_size * self.states_per_step
        return self.islands


class PACEvolvePPConfig(LearningConfig):
    """PACEvolve++: phase-adaptive mix of Dr.GRPO and SLOO k-1, DAPO clipping, no KL."""

    PAPER: ClassVar[dict[str, Any]] = PACEVOLVE_PP_PAPER
    CPU: ClassVar[dict[str, Any]] = CPU_COMMON


class ThetaEvolveConfig(LearningConfig):
    """ThetaEvolve as an advisor-training baseline: GRPO, PPO clip (clip-higher under ``paper``)."""

    PAPER: ClassVar[dict[str, Any]] = THETAEVOLVE_PAPER
    CPU: ClassVar[dict[str, Any]] = CPU_COMMON
    estimator: str = "grpo"
    clip_eps_hi: float = Field(default=0.2, ge=0.0)
    """Upper clip bound (0.2 here; the published run uses clip-higher 0.28, ``settings = paper``)."""


class TTTDiscoverConfig(LearningConfig):
    """TTT-Discover: adaptive entropic objective, KL shaping and PUCT state reuse."""

    PAPER: ClassVar[dict[str, Any]] = TTT_DISCOVER_PAPER
    CPU: ClassVar[dict[str, Any]] = CPU_COMMON
    estimator: str = "entropic"
    clip: bool = False
    loss_aggregation: Literal["token_mean", "seq_mean", "token_sum"] = "token_sum"
    kl_mode: Literal["none", "shaping", "loss"] = "shaping"
    kl_coef: float = Field(default=0.1, ge=0.0)
    """KL shaping coefficient lambda (0.1; TTT-Discover used 0.01 for algorithm engineering)."""
    state_reuse: StateReuse = "puct"


class MaxKConfig(LearningConfig):
    """Max@k (PKPO): the SLOO k-1 best-of-k estimator, clip 0.2 / 0.28, no KL."""

    PAPER: ClassVar[dict[str, Any]] = MAXK_PAPER
    CPU: ClassVar[dict[str, Any]] = CPU_COMMON
    estimator: str = "sloo_minus_one"
