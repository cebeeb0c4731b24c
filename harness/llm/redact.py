"""Keep API keys out of everything the harness writes: ledgers, logs, results and error messages.

Keys reach the LLM layer only through the process environment (litellm reads them itself); no
configuration field, ledger column or prompt ever holds one. What can still leak is text produced
by a provider or a client library, typically an error message that quotes the key it rejected.
Every such string passes through :func:`redact` before it is stored or logged, and
:func:`install_log_redaction` puts a filter on the loggers that litellm and this package use.

A value is treated as secret when the environment variable holding it has a secret-looking name
(``*_API_KEY``, ``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*PASSWORD*``, ...) and it is at least
:data:`MIN_SECRET_LENGTH` characters long. Common key shapes (``sk-...``, ``AIza...``, bearer
tokens) are masked even when they are not in the environment.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping

REDACTED = "[REDACTED]"
"""What a secret is replaced with."""
MIN_SECRET_LENGTH = 8
"""Shorter values of secret-named variables are left alone (they would mask ordinary words)."""

_SECRET_NAME = re.compile(
    r"(API_?KEY|_KEY|_KEYS|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?|_PAT)$|^(AWS_SECRET|AZURE_.*KEY)",
    re.IGNORECASE,
)
_KEY_SHAPES = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{16,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),
    re.compile(r"\b(?:ghp|gho|ghs|hf)_[A-Za-z0-9]{20,}"),
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-]{16,}"),
)
LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
"""Names of the loggers litellm writes to."""


def is_secret_name(name: str) -> bool:
    """Whether an environment variable name looks like it holds a credential.

    Args:
        name: The variable name.

    Returns:
        True for names such as ``OPENAI_API_KEY``, ``HF_TOKEN`` or ``AWS_SECRET_ACCESS_KEY``.
    """
    return bool(_SECRET_NAME.search(name))


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The secret values present in an environment, longest first.

    Args:
        environ: The environment to scan (the process environment when None).

    Returns:
        Distinct values of secret-named variables that are long enough to mask.
    """
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> str:
    """Mask every secret value and key-shaped token in ``text``.

    Args:
        text: Any text (an error message, a log line, a model response).
        environ: Environment whose secret-named values are masked (the process environment when None).
        extra: Further literal values to mask.

    Returns:
        The text with each secret replaced by :data:`REDACTED`.
    """
    if not text:
        return text
    for value in [*secret_values(environ), *(e for e in extra if len(e) >= MIN_SECRET_LENGTH)]:
        if value in text:
            text = text.replace(value, REDACTED)
    for shape in _KEY_SHAPES:
        text = shape.sub(REDACTED, text)
    return text


class RedactingFilter(logging.Filter):
    """A logging filter that masks secrets in a record's message and traceback text.

    The record is rewritten in place (message formatted, arguments dropped, exception rendered
    to text), so every handler downstream sees only the masked version.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Mask the record and let it through.

        Args:
            record: The log record.

        Returns:
            Always True (records are cleaned, never dropped).
        """
        try:
            message = record.getMessage()
        except Exception:  # a malformed format string: keep what we can
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactingFilter()


def install_log_redaction(names: Iterable[str] = ()) -> None:
    """Attach the redacting filter to litellm's loggers, this package's logger and ``names``.

    A logger filter only sees records logged through that logger, so pass the exact loggers an
    agent writes to (e.g. ``ctx.log.name``). Installing twice is harmless.

    Args:
        names: Further logger names to protect.
    """
    for name in (*LITELLM_LOGGERS, "harness.llm", *names):
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)
        for handler in logger.handlers:
            if _FILTER not in handler.filters:
                handler.addFilter(_FILTER)
