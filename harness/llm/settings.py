"""Settings of an :class:`~harness.llm.client.LLMClient` and the response it returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Message = dict[str, Any]
"""One chat message (``{"role": ..., "content": ...}``)."""


class LLMSettings(BaseModel):
    """Transport settings shared by every role of one client."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    timeout_s: float = Field(default=600.0, gt=0)
    """Seconds before one request is abandoned (a transient error)."""
    max_retries: int = Field(default=3, ge=0)
    """Retries of a request after transient errors (0: no retry)."""
    backoff_s: float = Field(default=2.0, ge=0)
    """Delay before the first retry; doubled on every further retry, with +-25 % jitter."""
    backoff_max_s: float = Field(default=60.0, ge=0)
    """Upper bound of one retry delay."""
    temperature: float | None = 1.0
    """Sampling temperature (None: the provider's default)."""
    max_tokens: int | None = None
    """Completion token limit (None: the provider's default)."""
    params: dict[str, Any] = {}
    """Further litellm keyword arguments (``api_base``, ``reasoning_effort``, ``mock_response``, ...).
    Credentials are refused here: keys come only from the environment."""
    cache_dir: Path | None = None
    """Response cache directory (None: no cache)."""
    max_cost_usd: float | None = Field(default=None, ge=0)
    """Cost cap in US dollars over the whole run, earlier sessions included (None: no cap)."""


@dataclass(frozen=True)
class LLMResponse:
    """The text of a successful call and what it cost."""

    text: str
    """Response content ("" when the model returned none)."""
    role: str
    """Role that made the call."""
    model: str
    """Model string the role maps to."""
    response_model: str
    """Model name reported by the response."""
    tokens_in: int
    """Prompt tokens."""
    tokens_out: int
    """Completion tokens."""
    cost_usd: float
    """Cost from the model cost map (0 for cache hits and the offline proposer)."""
    latency_s: float
    """Seconds spent, retries and backoff included."""
    cache_hit: bool
    """Whether the response came from the cache."""
    offline: bool
    """Whether the offline proposer (not an LLM) answered."""
    attempts: int
    """Attempts made (1 without retries)."""
