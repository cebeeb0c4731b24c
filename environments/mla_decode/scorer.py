"""MLA-Decode scorer: DeepSeek-V3 shapes, upstream cases and seeds, output and updated cache checked.

Protocol in ``harness.kernels``. The candidate receives copies of all five weights through the
wire; the checker's weights (W_o included) never leave this process, so mutating them cannot move
the reference. The KV cache is the one input the call may update in place; the returned cache is
compared with the reference's (rtol = 2e-2, atol = 8e-3, as upstream).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictInt, ValidationError

from harness.evaluation.errors import InfraError
from harness.kernels.checks import compare
from harness.kernels.evaluate import Case, KernelTask
from harness.kernels.scorer import KernelScorer
from harness.kernels.session import OutSpec
from harness.kernels.wall import CaseSize
from harness.scoring.api import CandidateRuntime, ScoreOutcome

from .adapter import GpuModeCandidate
from .reference import WEIGHT_KEYS, MLAConfig, generate, mla_decode

# Position of the KV cache among the flattened input tensors: the five weights, x, then the cache.
CACHE_INDEX = len(WEIGHT_KEYS) + 1


class MLACase(BaseModel):
    """One case: how many cache rows are filled before the decoded token, and its seed."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    prefill: StrictInt
    seed: StrictInt


class MLATask:
    """Inputs and check of one decode call."""

    def __init__(self, cfg: MLAConfig, device: str, rtol: float, atol: float) -> None:
        """Bind the shapes, device and tolerances."""
        self.cfg, self.device, self.rtol, self.atol = cfg, device, rtol, atol

    def inputs(self, case: Case, seed: int) -> Any:
        """``[config, x, kv_cache]`` from ``seed``."""
        return generate(self.cfg, int(case.spec["prefill"]), seed, self.device)

    def expected(self, case: Case, args: Any) -> list[OutSpec]:
        """The bfloat16 output ``(bs, 1, dim)`` and the updated cache, shaped like the input cache."""
        config, x, kv = args
        return [("bfloat16", (*x.shape[:-1], int(config["dim"]))), ("bfloat16", tuple(kv["data"].shape))]

    def reference(self, case: Case, args: Any) -> Any:
        """The reference's ``(output, updated cache)`` for ``args``, whose cache it leaves as is."""
        config, x, kv = args
        return mla_decode(config, x, {**kv, "data": kv["data"].clone()})

    def check(self, case: Case, args: Any, out: Any) -> None:
        """Output and updated cache against the reference (raises ``CandidateInvalid``)."""
        from harness.evaluation.errors import CandidateInvalid

        config, x, kv = args
        want_out, want_cache = mla_decode(config, x, kv)
        if not isinstance(out, list) or len(out) != 2:
            raise CandidateInvalid("rule 'output': expected (output, kv_cache) from custom_kernel")
        compare("output", out[0], want_out, self.rtol, self.atol)  # on the reference's device
        compare("kv_cache", out[1], want_cache, self.rtol, self.atol)


def _cases(raw: Any, kind: str, cfg: MLAConfig) -> list[Case]:
    if not isinstance(raw, list) or not raw:
        raise InfraError(f"[scorer] {kind} must be a non-empty list of cases")
    out = []
    for i, spec in enumerate(raw):
        try:
            c = MLACase(**spec)
        except (TypeError, ValidationError) as e:
            raise InfraError(f"[scorer] {kind}[{i}] is not a valid MLA case: {e}") from e
        if not 0 <= c.prefill < cfg.max_seq_len:
            raise InfraError(f"[scorer] {kind}[{i}]: prefill {c.prefill} outside [0, {cfg.max_seq_len})")
        out.append(Case(f"{kind[:-1]}{i}_prefill{c.prefill}", c.seed, c.model_dump()))
    return out


def call_bytes(cfg: MLAConfig) -> tuple[int, int]:
    """Bytes one call moves in (five weights, x, the whole cache) and out (output, cache), bf16.

    The cache buffer is sent whole, whatever the prefill (``reference.generate``).
    """
    h, nope, rope, v = cfg.n_heads, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    weights = (
        cfg.q_lora_rank * cfg.dim
        + (nope + rope) * h * cfg.q_lora_rank
        + (cfg.kv_lora_rank + rope) * cfg.dim
        + (nope + v) * h * cfg.kv_lora_rank
        + cfg.dim * v * h
    )
    cache = cfg.batch_size * cfg.max_seq_len * (cfg.kv_lora_rank + rope)
    x = cfg.batch_size * cfg.dim
    return 2 * (weights + x + cache), 2 * (x + cache)


def wall_sizes(params: dict[str, Any]) -> tuple[list[CaseSize], list[CaseSize]]:
    """The tests' and benchmarks' call sizes under ``params`` (``harness.kernels.wall``).

    Raises:
        InfraError: The manifest's model or cases are malformed.
    """
    try:
        cfg = MLAConfig(**dict(params.get("model", {})))
    except (TypeError, ValidationError) as e:
        raise InfraError(f"[scorer] model is not a valid MLA config: {e}") from e
    size = call_bytes(cfg)
    tests = [CaseSize(c.name, *size) for c in _cases(params.get("tests"), "tests", cfg)]
    return tests, [CaseSize(c.name, *size) for c in _cases(params.get("benchmarks"), "benchmarks", cfg)]


class MLAScorer(KernelScorer):
    """See the module docstring; parameters in ``env.toml``."""

    mutable = (CACHE_INDEX,)

    def cases(self) -> tuple[Sequence[Case], Sequence[Case]]:
        """Tests and benchmarks from the manifest."""
        try:
            self.cfg = MLAConfig(**dict(self.params.get("model", {})))
        except (TypeError, ValidationError) as e:
            raise InfraError(f"[scorer] model is not a valid MLA config: {e}") from e
        return (
            _cases(self.params.get("tests"), "tests", self.cfg),
            _cases(self.params.get("benchmarks"), "benchmarks", self.cfg),
        )

    def score(self, candidate: CandidateRuntime) -> ScoreOutcome:
        """Score with GPU MODE's ``Config`` / ``KVCache`` objects available (see :mod:`.adapter`).

        Raises:
            CandidateError: The submission failed to load or raised.
            CandidateInvalid: An output or the cache is wrong.
            CandidateTimeout: The budget ran out.
        """
        return super().score(GpuModeCandidate(candidate))  # type: ignore[arg-type]

    def task(self) -> KernelTask:
        """MLA decode on the chosen device."""
        return MLATask(self.cfg, self.device.device, float(self.params["rtol"]), float(self.params["atol"]))
