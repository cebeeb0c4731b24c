"""An :class:`LLMClient` that applies the current prompt configuration to the proposer's calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.llm import LLMClient, LLMResponse, Message

from .prompt_config import PromptConfig

PROPOSER_ROLES = ("advisor", "implementer", "summariser")
"""Roles whose prompts the prompt configuration edits (the controller's are fixed)."""


class PromptedClient(LLMClient):
    """Routes every proposer call through the prompt configuration of its island.

    ``prompt_for(thread)`` gives the configuration for an island (the incumbent, or the round's
    candidate for that island); the role sentence, requirements, reply format and temperature are
    applied here, so the scaffold's roles need no change.
    """

    def __init__(self, *args: Any, prompt_for: Callable[[int], PromptConfig], **kwargs: Any) -> None:
        """Build the client (arguments as :class:`LLMClient`) with the per-island configuration lookup."""
        super().__init__(*args, **kwargs)
        self.prompt_for = prompt_for

    def complete(
        self,
        role: str,
        messages: list[Message],
        *,
        seed: int | None = None,
        stage: str = "",
        step: int = -1,
        thread: int = -1,
        temperature: float | None = None,
    ) -> LLMResponse:
        """:meth:`LLMClient.complete` with the island's prompt configuration applied to proposer roles.

        Raises:
            LLMConfigError: If the role is unknown.
            BudgetExhausted: If the run's LLM cost cap is reached.
            LLMCallFailed: On a permanent error or when transient errors outlast the retries.
        """
        if role in PROPOSER_ROLES:
            cfg = self.prompt_for(thread)
            messages = cfg.apply(messages, implementer=role == "implementer")
            if temperature is None:
                temperature = cfg.temperature
        return super().complete(
            role, messages, seed=seed, stage=stage, step=step, thread=thread, temperature=temperature
        )
