"""LLM layer on litellm: roles, retries, a per-call ledger, a cost cap, a response cache, key masking.

Importing this package does not import litellm (that happens on the first call). Model strings
are litellm's (``gemini/gemini-2.5-pro``, ``openai/gpt-4o``, ...) plus ``offline/<name>``, the
deterministic offline proposer (NOT an LLM) of :mod:`harness.llm.offline`.
"""

from .cache import CachedResponse, ResponseCache, request_key
from .client import LLMClient
from .errors import LLMCallFailed, LLMConfigError, LLMError
from .journal import RecordJournal
from .ledger import KIND_LLM, KIND_OFFLINE, LEDGER_STEM, Ledger, LLMCallRow
from .redact import REDACTED, RedactingFilter, install_log_redaction, redact, secret_values
from .settings import LLMResponse, LLMSettings, Message
from .transport import OFFLINE_PREFIX, is_offline, is_transient, litellm_module

__all__ = [
    "KIND_LLM",
    "KIND_OFFLINE",
    "LEDGER_STEM",
    "OFFLINE_PREFIX",
    "REDACTED",
    "CachedResponse",
    "LLMCallFailed",
    "LLMCallRow",
    "LLMClient",
    "LLMConfigError",
    "LLMError",
    "LLMResponse",
    "LLMSettings",
    "Ledger",
    "Message",
    "RecordJournal",
    "RedactingFilter",
    "ResponseCache",
    "install_log_redaction",
    "is_offline",
    "is_transient",
    "litellm_module",
    "redact",
    "request_key",
    "secret_values",
]
