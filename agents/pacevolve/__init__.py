"""PACEvolve: progress-aware consistent evolution (HCM idea pool, momentum backtracking, adaptive crossover).

``PACEvolveAgent`` is registered as ``pacevolve``. Its LLM roles (advisor, implementer,
summariser) use any litellm model; ``offline/pacevolve`` is a deterministic offline proposer
(NOT an LLM) for CI and the no-network quick start. See ``README.md`` in this folder.
"""

from .agent import PACEvolveAgent
from .collaboration import ActionWeights, action_weights, choose_action
from .config import PACEvolveConfig
from .momentum import Momentum, power_law_weights, progress_of, relative_progress, sample_power_law
from .roles import (
    Advisor,
    Classification,
    Implementer,
    IslandView,
    ProposalError,
    Selection,
    Summariser,
    Summary,
)
from .telemetry import EventRow, IterationRow, StepObserver, events_of

__all__ = [
    "ActionWeights",
    "Advisor",
    "Classification",
    "EventRow",
    "Implementer",
    "IslandView",
    "IterationRow",
    "Momentum",
    "PACEvolveAgent",
    "PACEvolveConfig",
    "ProposalError",
    "Selection",
    "StepObserver",
    "Summariser",
    "Summary",
    "action_weights",
    "choose_action",
    "events_of",
    "power_law_weights",
    "progress_of",
    "relative_progress",
    "sample_power_law",
]
