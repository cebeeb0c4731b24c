"""Optional response cache: identical requests (model, messages, parameters, seed) get the stored answer.

Entries are small JSON files named by the request hash (``<dir>/<ab>/<sha256>.json``), written
atomically, so concurrent writers and crashes never leave half an entry. Inside one run the
cache makes a resumed step repeat the answers its interrupted first attempt already paid for;
shared between runs it replays whole searches whose prompts and seeds are identical.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harness.results.atomic import atomic_write_json

from .redact import redact

_SHA = re.compile(r"^[0-9a-f]{64}$")


def request_key(model: str, messages: list[dict[str, Any]], params: dict[str, Any], seed: int | None) -> str:
    """The cache key of a request: sha256 of its canonical JSON.

    Args:
        model: litellm model string.
        messages: Chat messages.
        params: Sampling and provider parameters (anything JSON-encodable; others use ``str``).
        seed: Sampling seed.

    Returns:
        A 64-hex-digit key.
    """
    blob = json.dumps(
        {"model": model, "messages": messages, "params": params, "seed": seed},
        sort_keys=True,
        default=str,
        ensure_ascii=False,
    )
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedResponse:
    """What the cache keeps of a response."""

    text: str
    """The response text (secrets masked)."""
    tokens_in: int
    """Prompt tokens of the original call."""
    tokens_out: int
    """Completion tokens of the original call."""
    response_model: str
    """Model name reported by the original response."""
    offline: bool = False
    """Whether the response came from the offline proposer (not an LLM)."""


class ResponseCache:
    """A directory of cached responses keyed by :func:`request_key`."""

    def __init__(self, directory: Path) -> None:
        """Use ``directory`` (created on first write).

        Args:
            directory: Cache root.
        """
        self.directory = directory

    def _path(self, key: str) -> Path:
        if not _SHA.match(key):
            raise ValueError(f"not a request key: {key!r}")
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> CachedResponse | None:
        """The cached response for ``key``, or None (also for unreadable entries).

        Raises:
            ValueError: If ``key`` is not a request key.
        """
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
            return CachedResponse(**data)
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None

    def put(self, key: str, entry: CachedResponse) -> None:
        """Store a response (its text masked) under ``key``.

        Raises:
            ValueError: If ``key`` is not a request key.
            OSError: If writing fails.
        """
        data = asdict(entry)
        data["text"] = redact(entry.text)
        atomic_write_json(self._path(key), data, indent=None)
