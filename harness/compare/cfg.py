"""Identity of one leaderboard record, without pandas: its configuration hash and flat settings.

The pieces :mod:`.identity` (frames) and :mod:`.labels` (readable names) share; importing them
costs nothing, so ``bench leaderboard`` can name identities without loading a dataframe library.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

CFG_HASH_LEN = 6
"""Hex digits of the configuration hash shown in labels (prefixes of it are accepted)."""
UNRECORDED_KEY = "unrecorded"
"""Held-out key label of rows written before the key was recorded (:func:`heldout_key_of`)."""


def parse_object(text: Any) -> dict[str, Any]:
    """A JSON object column value; missing / unreadable values are an empty (unknown) mapping."""
    if not isinstance(text, str) or not text:
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def cfg_hash(config: dict[str, Any], models: dict[str, Any], budget: dict[str, Any]) -> str:
    """Short hash of an effective configuration (config, models per role, budget).

    Returns:
        :data:`CFG_HASH_LEN` lowercase hex digits.
    """
    canon = json.dumps({"config": config, "models": models, "budget": budget}, sort_keys=True)
    return hashlib.sha256(canon.encode()).hexdigest()[:CFG_HASH_LEN]


def identity_of(row: Mapping[str, Any]) -> str:
    """The ``<agent>@<cfg>`` identity of one leaderboard record (a row as a mapping)."""
    parts = (parse_object(row.get(c)) for c in ("agent_config_json", "models_json", "budget_json"))
    return f"{row['agent']}@{cfg_hash(*parts)}"


def effective(row: Mapping[str, Any]) -> dict[str, Any]:
    """The flat effective configuration of a leaderboard row: ``config.*``, ``models.*``, ``budget.*``."""
    out: dict[str, Any] = {}
    for part in ("config", "models", "budget"):
        for k, v in sorted(
            parse_object(row.get(f"{'agent_config' if part == 'config' else part}_json")).items()
        ):
            out[f"{part}.{k}"] = v
    return out


def heldout_key_of(row: Mapping[str, Any]) -> str:
    """A row's held-out key: a fingerprint, ``public``, ``none`` (no held-out draw) or ``unrecorded``."""
    k = row.get("heldout_key")
    return UNRECORDED_KEY if not isinstance(k, str) else (k or "none")
