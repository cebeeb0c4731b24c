"""Names of the backends and candidate start modes (no imports: the CLI reads them at start)."""

from __future__ import annotations

from typing import Literal

BackendName = Literal["local", "docker", "modal"]
"""Where candidates are evaluated: a local process, a Docker container, a Modal sandbox."""

Mode = Literal["cold", "warm"]
"""``cold``: a fresh interpreter per candidate; ``warm``: a fork of a pre-imported zygote."""
