"""LLM-layer tests run offline: litellm uses its bundled cost map, never the network."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
