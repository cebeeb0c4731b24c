"""PACE: two-timescale prompt and control-logic evolution with a frozen model (registered as ``pace``).

See ``README.md`` in this folder.
"""

from .agent import PACEAgent
from .config import PACEConfig

__all__ = ["PACEAgent", "PACEConfig"]
