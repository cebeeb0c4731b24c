"""litellm set-up shared by the LLM layer: offline cost map, quiet output, masked logs, error classes."""

from __future__ import annotations

import os
import threading
from typing import Any

from .redact import install_log_redaction

OFFLINE_PREFIX = "offline/"
"""Model strings starting with this go to the offline proposer (not an LLM)."""
_TRANSIENT_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504, 529})
_setup_lock = threading.Lock()


def litellm_module() -> Any:
    """Import litellm configured for offline cost lookup, quiet output and masked logs.

    Also registers the offline proposer as the ``offline`` custom provider.

    Returns:
        The litellm module.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    with _setup_lock:
        if not getattr(litellm, "_evobench_ready", False):
            litellm.suppress_debug_info = True
            install_log_redaction()
            from .offline.provider import register_offline_provider

            register_offline_provider(litellm)
            litellm._evobench_ready = True
    return litellm


def is_offline(model: str) -> bool:
    """Whether a model string names the offline proposer (not an LLM)."""
    return model.startswith(OFFLINE_PREFIX)


def is_transient(exc: BaseException) -> bool:
    """Whether an error is worth retrying: rate limit, timeout, connection or server-side error.

    Args:
        exc: The exception raised by litellm.

    Returns:
        True for transient errors; authentication, bad-request, context-window, content-policy
        and not-found errors are permanent.
    """
    import openai

    permanent = (
        openai.AuthenticationError,
        openai.PermissionDeniedError,
        openai.NotFoundError,
        openai.BadRequestError,
        openai.UnprocessableEntityError,
    )
    if isinstance(exc, permanent):
        return False
    if isinstance(exc, openai.RateLimitError | openai.APITimeoutError | openai.APIConnectionError):
        return True
    if isinstance(exc, openai.InternalServerError | TimeoutError | ConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status in _TRANSIENT_STATUS
