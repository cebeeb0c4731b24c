"""Exceptions of the LLM layer. Every message is masked (no credential can appear in one)."""

from __future__ import annotations


class LLMError(RuntimeError):
    """Base class of LLM-layer errors."""


class LLMConfigError(LLMError, ValueError):
    """The LLM configuration cannot work: unknown role, missing API key, a key passed as a parameter."""


class LLMCallFailed(LLMError):
    """A call failed for good: a non-transient error, or transient errors past the retry limit.

    Attributes:
        role: The role that made the call.
        model: The model string.
        error_type: Class name of the last underlying exception.
        transient: Whether the last error was transient (the retries ran out).
    """

    def __init__(self, role: str, model: str, error_type: str, message: str, transient: bool) -> None:
        """Build the error from an already masked message."""
        super().__init__(f"{role} call to {model} failed ({error_type}): {message}")
        self.role = role
        self.model = model
        self.error_type = error_type
        self.transient = transient
