"""The interface both backends implement, and the records that cross it."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Completion:
    """One sampled completion, with the sampler's ids and log-probs (never re-tokenised).

    Attributes:
        prompt_ids: Prompt token ids (masked out of the loss).
        token_ids: Generated ids, including the EOS token when one was produced.
        logprobs: Sampler log-prob of each generated id after temperature scaling.
        text: Decoded completion (special tokens skipped).
        finished: Whether generation stopped on EOS (False: length limit).
        adapter_version: Adapter version that sampled it.
        constraint: The regex the completion was decoded under (None: unconstrained). The
            learner replays the tokens through it to mask the same logits the sampler masked.
    """

    prompt_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    finished: bool
    adapter_version: int
    constraint: str | None = None

    def __post_init__(self) -> None:
        """Check lengths and finiteness.

        Raises:
            ValueError: If ids and log-probs differ in length, or a log-prob is not finite.
        """
        if len(self.token_ids) != len(self.logprobs):
            raise ValueError("token_ids and logprobs differ in length")
        if not np.all(np.isfinite(np.asarray(self.logprobs, dtype=np.float64))):
            raise ValueError("sampler log-probs must be finite")

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable dict (replay fixtures)."""
        return {
            "prompt_ids": list(self.prompt_ids),
            "token_ids": list(self.token_ids),
            "logprobs": list(self.logprobs),
            "text": self.text,
            "finished": self.finished,
            "adapter_version": self.adapter_version,
            "constraint": self.constraint,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Completion:
        """Inverse of :meth:`to_json`.

        Raises:
            KeyError: If a field is missing.
            ValueError: If the record is inconsistent.
        """
        return cls(
            prompt_ids=tuple(int(i) for i in d["prompt_ids"]),
            token_ids=tuple(int(i) for i in d["token_ids"]),
            logprobs=tuple(float(x) for x in d["logprobs"]),
            text=str(d["text"]),
            finished=bool(d["finished"]),
            adapter_version=int(d["adapter_version"]),
            constraint=None if d.get("constraint") is None else str(d["constraint"]),  # old fixtures: none
        )


@dataclass(frozen=True)
class SampleRequest:
    """One completion to sample in a batch of requests (each with its own seed and constraint)."""

    prompt_ids: tuple[int, ...]
    """Prompt token ids."""
    max_new_tokens: int
    """Generation limit (a constrained answer cut here is just unfinished)."""
    seed: int
    """Seed of this row's own random generator (its draws do not depend on its batch mates)."""
    constraint: str | None = None
    """Regex the answer must match (xgrammar dialect), or None."""


@dataclass
class UpdateStats:
    """What one update did (diagnostics columns filled by the backend)."""

    loss: float
    entropy: float
    grad_norm: float
    clip_frac: float
    kl: float
    logprob_gap: float
    tokens: int
    stepped: bool = True
    skip_reason: str = ""
    extra: dict[str, float] = field(default_factory=dict)


class PolicyBackend(ABC):
    """Sample, score, update and version a LoRA policy."""

    adapter_version: int

    @abstractmethod
    def sample(
        self, prompts: Sequence[Sequence[int]], n: int, max_new_tokens: int, temperature: float, seed: int
    ) -> list[list[Completion]]:
        """Sample ``n`` completions per prompt from the current adapter.

        Returns:
            One list of ``n`` completions per prompt.
        """

    def sample_requests(self, requests: Sequence[SampleRequest], temperature: float) -> list[Completion]:
        """One completion per request, served as one batch where the backend can.

        The default serves unconstrained requests one at a time through :meth:`sample`.

        Raises:
            NotImplementedError: If a request has a constraint this backend cannot apply.
        """
        out = []
        for r in requests:
            if r.constraint is not None:
                raise NotImplementedError(f"{type(self).__name__} cannot decode under a constraint")
            [[c]] = self.sample([list(r.prompt_ids)], 1, r.max_new_tokens, temperature, seed=r.seed)
            out.append(c)
        return out

    @abstractmethod
    def score(
        self, completions: Sequence[Completion], temperature: float, adapter: bool = True
    ) -> list[np.ndarray]:
        """Learner log-probs of each completion's tokens at ``temperature`` (no gradient).

        ``adapter = False`` scores with the adapter switched off: the initial weights.
        """

    @abstractmethod
    def update(
        self, completions: Sequence[Completion], advantages: Sequence[float], temperature: float
    ) -> UpdateStats:
        """One optimiser step on the batch with per-completion advantages (broadcast to tokens)."""

    @abstractmethod
    def export_adapter(self, path: Path) -> None:
        """Write the current adapter as a PEFT directory."""

    @abstractmethod
    def load_adapter(self, path: Path, version: int) -> None:
        """Replace the current adapter weights with those in ``path`` and set the version."""

    @abstractmethod
    def save_state(self, path: Path) -> None:
        """Write adapter and optimiser state (for resumption) under ``path``."""

    @abstractmethod
    def load_state(self, path: Path, version: int) -> None:
        """Restore what :meth:`save_state` wrote."""
