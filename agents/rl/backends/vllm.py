"""vLLM sampler + peft learner (GPU extra): each update is served as a new versioned LoRA adapter.

The learner is an :class:`~agents.rl.backends.hf.HFBackend` (scoring, updates, optimiser,
checkpoints). The sampler is an offline ``vllm.LLM`` built with ``enable_lora=True`` and
``logprobs_mode="processed_logprobs"`` (vLLM >= 0.10.2), in bf16 or fp16 (its LoRA kernels refuse
fp32), so the returned log-prob of each sampled token is taken after temperature scaling,
matching the learner's ``log_softmax(logits / T)``. After every update the adapter is
written as a PEFT directory ``<adapter_dir>/v<version>`` and requests are routed to
``LoRARequest(f"{prefix}-v{version}", version + 1, path)``. ``LLM.generate`` is synchronous,
so when it returns no request of an older version is in flight; versions older than
``keep_versions`` are then removed from the engine (``remove_lora``) and from disk.
Version 0 (the fresh adapter, B = 0) is served as the base model without a LoRA request.

Sampling uses no top-p/top-k and no penalties, so the behaviour policy is exactly
``softmax(logits / T)``; a constrained request (:meth:`VLLMBackend.sample_requests`) passes its
regex as ``SamplingParams(structured_outputs=StructuredOutputsParams(regex=...))`` with the
engine's structured-output backend pinned to xgrammar, and vLLM applies the grammar bitmask to
the logits in place before its sampler, so the processed log-probs are the masked
``log_softmax(mask(logits) / T)`` the learner recomputes (``agents/rl/README.md``).
Written against vLLM's documented offline API; see
``agents/rl/README.md`` for what the GPU tests cover and what is untested.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agents.rl.backends.base import Completion, PolicyBackend, SampleRequest, UpdateStats
from agents.rl.backends.hf import HFBackend

_RANK_SLOTS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
MIN_VLLM = (0, 10, 2)
"""Oldest vLLM whose ``processed_logprobs`` are taken after temperature scaling (``logprobs_mode``
appeared in 0.10.0, vllm-project/vllm#21398; final processed values in 0.10.2, #22387)."""
MAX_TEMPERATURE = 2.0
"""vLLM's ``SamplingParams`` rejects a temperature above 2 (0.33.0 ``_verify_args``)."""


def _version_tuple(version: str) -> tuple[int, ...]:
    """Leading numeric release of a version string (``0.10.2rc1`` -> ``(0, 10, 2)``)."""
    parts: list[int] = []
    for piece in version.split(".")[:3]:
        digits = re.match(r"\d+", piece)
        if digits is None:
            break
        parts.append(int(digits.group()))
    return tuple(parts)


def check_vllm_version(version: str) -> None:
    """Refuse vLLM releases without post-temperature ``processed_logprobs``.

    Raises:
        VLLMUnavailableError: If ``version`` is older than :data:`MIN_VLLM`.
    """
    if _version_tuple(version) < MIN_VLLM:
        floor = ".".join(map(str, MIN_VLLM))
        raise VLLMUnavailableError(
            f"vLLM {version} is too old: the learner's importance ratios need logprobs_mode="
            f"'processed_logprobs' after temperature (vLLM >= {floor}); pip install 'evobench[gpu]'"
        )


def engine_args(
    base_model: str,
    lora_rank: int,
    keep_versions: int,
    max_model_len: int,
    gpu_memory_utilization: float,
    bf16_supported: bool,
    structured_outputs: bool = True,
) -> dict[str, Any]:
    """Keyword arguments of ``vllm.LLM`` for a LoRA-serving sampler.

    vLLM's LoRA kernels accept only fp16 / bf16 weights and activations (0.33.0
    ``lora/ops/triton_ops/lora_shrink_op.py`` asserts it), so the engine never runs in fp32:
    bf16 where the GPU has it (Ampere and later), else fp16. The learner stays fp32; the
    sampler/learner log-prob gap this leaves is what truncated importance sampling corrects.
    ``structured_outputs`` pins the structured-output backend to xgrammar, the library the
    learner replays constraints with (``auto`` could pick guidance or outlines).
    """
    args: dict[str, Any] = {
        "model": base_model,
        "enable_lora": True,
        "max_lora_rank": _lora_rank_slot(lora_rank),
        "max_loras": keep_versions,
        "max_model_len": max_model_len,
        "gpu_memory_utilization": gpu_memory_utilization,
        "logprobs_mode": "processed_logprobs",
        "dtype": "bfloat16" if bf16_supported else "float16",
    }
    if structured_outputs:
        args["structured_outputs_config"] = {"backend": "xgrammar"}
    return args


def request_params(
    n: int, temperature: float, max_tokens: int, seed: int, regex: str | None
) -> dict[str, Any]:
    """Keyword arguments of ``SamplingParams`` for one request (``structured_outputs`` as a dict).

    No top-p/top-k and no penalties, so the behaviour policy is exactly ``softmax(mask(logits) / T)``.
    """
    kwargs: dict[str, Any] = {
        "n": n,
        "temperature": temperature,
        "top_p": 1.0,
        "top_k": -1,
        "max_tokens": max_tokens,
        "logprobs": 0,
        "seed": seed,
    }
    if regex is not None:
        kwargs["structured_outputs"] = {"regex": regex}
    return kwargs


def sampling_params(kwargs: dict[str, Any]) -> Any:
    """``vllm.SamplingParams`` from :func:`request_params` output.

    Raises:
        VLLMUnavailableError: If a constraint is asked of a vLLM without ``StructuredOutputsParams``.
    """
    from vllm import SamplingParams

    kwargs = dict(kwargs)
    structured = kwargs.pop("structured_outputs", None)
    if structured is not None:
        try:
            from vllm.sampling_params import StructuredOutputsParams
        except ImportError as e:
            raise VLLMUnavailableError(
                f"constrained decoding needs vLLM's StructuredOutputsParams ({e}); upgrade vLLM or set "
                "constrained_decoding = false"
            ) from e
        kwargs["structured_outputs"] = StructuredOutputsParams(**structured)
    return SamplingParams(**kwargs)


def _lora_rank_slot(r: int) -> int:
    """Smallest ``max_lora_rank`` value vLLM accepts that fits rank ``r``.

    Raises:
        ValueError: If ``r`` exceeds the largest slot.
    """
    for slot in _RANK_SLOTS:
        if r <= slot:
            return slot
    raise ValueError(f"LoRA rank {r} exceeds vLLM's largest max_lora_rank {_RANK_SLOTS[-1]}")


def _check_temperature(temperature: float) -> None:
    if temperature > MAX_TEMPERATURE:
        raise ValueError(f"vLLM samples at temperature <= {MAX_TEMPERATURE}, got {temperature}")


class VLLMUnavailableError(RuntimeError):
    """vLLM is not installed or no GPU is available."""


class VLLMBackend(PolicyBackend):
    """Sample with vLLM, learn with peft.

    Args:
        learner: The peft learner (on the GPU) whose adapter vLLM serves.
        base_model: What vLLM loads as the base (a directory or model id with the same weights
            as the learner's base; for a GGUF policy, a directory the learner's base was saved to).
        adapter_dir: Where adapter versions are written (``/dev/shm/...`` avoids disk wear).
        max_model_len: vLLM context length.
        gpu_memory_utilization: Fraction of GPU memory vLLM may take (the learner needs the rest).
        keep_versions: Adapter versions kept loaded (>= 2 so the previous one can drain).
        prefix: Adapter name prefix.
        llm: An already-built engine (tests); built from the other arguments when None.

    Raises:
        VLLMUnavailableError: If vLLM cannot be imported.
    """

    def __init__(
        self,
        learner: HFBackend,
        base_model: str,
        adapter_dir: Path,
        max_model_len: int = 4096,
        gpu_memory_utilization: float = 0.45,
        keep_versions: int = 2,
        prefix: str = "policy",
        llm: Any | None = None,
    ) -> None:
        """Build (or adopt) the engine; see the class docstring."""
        try:
            import vllm
            from vllm import LLM
        except ImportError as e:
            raise VLLMUnavailableError(
                f"the vllm backend needs vLLM and a GPU: pip install 'evobench[gpu]' ({e})"
            ) from e
        check_vllm_version(str(getattr(vllm, "__version__", "0")))
        if keep_versions < 2:
            raise ValueError(
                "keep_versions must be >= 2 (the previous version drains while the new one loads)"
            )
        self.learner = learner
        self.adapter_dir = Path(adapter_dir)
        self.adapter_dir.mkdir(parents=True, exist_ok=True)
        self.keep_versions = keep_versions
        self.prefix = prefix
        if llm is None:
            import torch
            from vllm import sampling_params as sp

            args = engine_args(
                base_model, learner.lora.r, keep_versions, max_model_len, gpu_memory_utilization,
                bf16_supported=bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported()),
                structured_outputs=hasattr(sp, "StructuredOutputsParams"),
            )  # fmt: skip
            llm = LLM(**args)
        self.llm = llm
        self.loaded: list[int] = []
        self.adapter_version = learner.adapter_version
        if self.adapter_version > 0:
            self._publish()

    # --------------------------------------------------------------- versions
    def _path(self, version: int) -> Path:
        return self.adapter_dir / f"v{version:06d}"

    def lora_request(self, version: int | None = None) -> Any:
        """The ``LoRARequest`` serving ``version`` (default: current), or None for version 0."""
        from vllm.lora.request import LoRARequest

        v = self.adapter_version if version is None else version
        if v == 0:
            return None
        # lora_int_id must be unique and positive per adapter content: one id per version.
        return LoRARequest(f"{self.prefix}-v{v}", v + 1, str(self._path(v)))

    def _publish(self) -> None:
        """Write the learner's adapter as the current version; vLLM loads it on first use."""
        self.learner.export_adapter(self._path(self.adapter_version))
        self.loaded.append(self.adapter_version)

    def _retire(self) -> None:
        """Drop versions beyond ``keep_versions`` (called when no request is in flight)."""
        while len(self.loaded) > self.keep_versions:
            old = self.loaded.pop(0)
            engine = getattr(self.llm, "llm_engine", None)
            if engine is not None and hasattr(engine, "remove_lora"):
                engine.remove_lora(old + 1)
            shutil.rmtree(self._path(old), ignore_errors=True)

    # --------------------------------------------------------------- interface
    def sample(
        self, prompts: Sequence[Sequence[int]], n: int, max_new_tokens: int, temperature: float, seed: int
    ) -> list[list[Completion]]:
        """Sample with vLLM from the current adapter version (processed log-probs).

        Raises:
            ValueError: If an argument is not positive, the temperature exceeds vLLM's limit of 2,
                or vLLM returns no log-prob for a token.
        """
        if n <= 0 or max_new_tokens <= 0 or not temperature > 0:
            raise ValueError("n, max_new_tokens and temperature must be positive")
        _check_temperature(temperature)
        params = sampling_params(request_params(n, temperature, max_new_tokens, seed, None))
        return self._generate(prompts, [params] * len(prompts), temperature, [None] * len(prompts))

    def sample_requests(self, requests: Sequence[SampleRequest], temperature: float) -> list[Completion]:
        """One completion per request in one ``generate`` call (own seed, limit and regex each).

        Raises:
            ValueError: If the temperature or a limit is not positive or above vLLM's limit.
            VLLMUnavailableError: If a constraint is asked of a vLLM without structured outputs.
        """
        if not temperature > 0 or any(r.max_new_tokens <= 0 for r in requests):
            raise ValueError("temperature and max_new_tokens must be positive")
        _check_temperature(temperature)
        if not requests:
            return []
        params = [
            sampling_params(request_params(1, temperature, r.max_new_tokens, r.seed, r.constraint))
            for r in requests
        ]
        groups = self._generate(
            [r.prompt_ids for r in requests], params, temperature, [r.constraint for r in requests]
        )
        return [g[0] for g in groups]

    def _generate(
        self,
        prompts: Sequence[Sequence[int]],
        params: list[Any],
        temperature: float,
        constraints: Sequence[str | None],
    ) -> list[list[Completion]]:
        from vllm.inputs import TokensPrompt

        inputs = [TokensPrompt(prompt_token_ids=list(p)) for p in prompts]
        outputs = self.llm.generate(inputs, params, lora_request=self.lora_request(), use_tqdm=False)
        self._retire()  # generate() has returned: every request of older versions has drained
        groups: list[list[Completion]] = []
        for prompt, out, constraint in zip(prompts, outputs, constraints, strict=True):
            group = []
            for o in out.outputs:
                ids = [int(t) for t in o.token_ids]
                if o.logprobs is None or len(o.logprobs) != len(ids):
                    raise ValueError("vLLM returned no log-prob for some sampled token")
                lps = [float(step[t].logprob) for step, t in zip(o.logprobs, ids, strict=True)]
                group.append(
                    Completion(
                        prompt_ids=tuple(int(t) for t in prompt), token_ids=tuple(ids), logprobs=tuple(lps),
                        text=o.text, finished=o.finish_reason == "stop", adapter_version=self.adapter_version,
                        constraint=constraint,
                    )
                )  # fmt: skip
            groups.append(group)
        return groups

    def score(
        self, completions: Sequence[Completion], temperature: float, adapter: bool = True
    ) -> list[np.ndarray]:
        """Learner log-probs (see :meth:`HFBackend.score`)."""
        return self.learner.score(completions, temperature, adapter)

    def update(
        self, completions: Sequence[Completion], advantages: Sequence[float], temperature: float
    ) -> UpdateStats:
        """Learner step, then publish the new adapter version to vLLM."""
        stats = self.learner.update(completions, advantages, temperature)
        if stats.stepped:
            self.adapter_version = self.learner.adapter_version
            self._publish()
        return stats

    def export_adapter(self, path: Path) -> None:
        """Write the learner's adapter as a PEFT directory."""
        self.learner.export_adapter(path)

    def load_adapter(self, path: Path, version: int) -> None:
        """Load weights into the learner and serve them as ``version``."""
        self.learner.load_adapter(path, version)
        self.adapter_version = version
        if version > 0:
            self._publish()

    def save_state(self, path: Path) -> None:
        """Learner adapter and optimiser state."""
        self.learner.save_state(path)

    def load_state(self, path: Path, version: int) -> None:
        """Restore the learner, then serve its adapter."""
        self.learner.load_state(path, version)
        self.adapter_version = version
        if version > 0:
            self._publish()
