"""Agent ids -> classes; unknown ids fail with close matches."""

from __future__ import annotations

from harness.envs.registry import UnknownIdError, unknown_id_message

from .base import Agent
from .learning.agent import PRESETS
from .pace import PACEAgent
from .pacevolve import PACEvolveAgent
from .random_search import RandomSearchAgent

_CLASSES: tuple[type[Agent], ...] = (RandomSearchAgent, PACEvolveAgent, *PRESETS, PACEAgent)
AGENTS: dict[str, type[Agent]] = {cls.name: cls for cls in _CLASSES}


def agent_ids() -> list[str]:
    """All registered agent ids."""
    return sorted(AGENTS)


def get_agent_class(name: str) -> type[Agent]:
    """Look up an agent class.

    Raises:
        UnknownIdError: If no agent has that id; the message suggests close matches.
    """
    try:
        return AGENTS[name]
    except KeyError:
        raise UnknownIdError(unknown_id_message("agent", name, agent_ids())) from None
