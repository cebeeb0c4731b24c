"""Configuration of the PACE agent (two-timescale prompt and control-logic evolution)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from agents.learning.local_provider import local_model_string
from agents.pacevolve.config import PACEvolveConfig


class PACEConfig(PACEvolveConfig):
    """PACE on the PACEvolve scaffold; no weights are updated.

    A frozen model edits its own prompt configuration (fast timescale) and, once that saturates,
    its control logic (slow timescale), behind a validation gate with rollback.
    """

    model: str = "local/smollm2-135m"
    """Frozen model for every role, proposer and controller alike (litellm string; the bare names
    ``smollm2-135m`` / ``tiny-random`` or a ``.gguf`` path mean a local model, ``local/<ref>``;
    ``offline/pacevolve`` is the offline proposer, NOT an LLM)."""
    controller_model: str | None = None
    """Override for the controller role (reflection, prompt revision, control edits); default:
    ``model`` (PACE uses one model for both)."""
    islands: int = Field(default=3, ge=2)
    """Islands; in a prompt round each runs one prompt configuration (island 0 the incumbent)."""

    epsilon: float = Field(default=0.01, ge=0.0, le=1.0)
    """ε: a prompt round whose validated progress gain ΔÛ_P (on the progress scale u in [0, 1]) is
    at most ε (``saturation_rule = "le"``) saturates prompt evolution."""
    saturation_rule: Literal["le", "lt"] = "le"
    """``le``: saturated when ΔÛ_P <= ε (the paper's §3.3.1 and the issue); ``lt``: when ΔÛ_P < ε
    (the paper's Algorithm 1 and App. A.4, under which ε = 0 disables control evolution)."""
    delta: float = Field(default=0.02, ge=-1.0, le=1.0)
    """δ: a control edit is accepted only when the new agent's program beats the incumbent's by more
    than δ in u on the same fresh validation subset (δ = -1 turns the gate off)."""
    saturation_estimate: Literal["round", "best_so_far"] = "round"
    """Û of ΔÛ_P = Û(A(P_t, C)) − Û(A(P_{t−1}, C)). ``round`` (the paper's definition): both agents
    measured in the same round, P_{t−1} by island 0 (which runs the incumbent), P_t by the island
    that ran it (its front entry's u when it is an older member); a round that keeps the incumbent
    has ΔÛ_P = 0. ``best_so_far``: u of the run's best full score after minus before the round
    (monotone, so every round without a new best saturates; the earlier behaviour)."""
    max_slow_attempts: int = Field(default=1, ge=0)
    """Rejected control edits in a row after which the agent returns to the fast timescale. The
    default 1 is Algorithm 1: a prompt round before every control attempt (it re-enters the slow
    timescale only when that round saturates again); 0: stay on the slow timescale until an edit
    is accepted."""
    subset_fraction: tuple[float, float] = (0.3, 0.7)
    """Range of the validation subset's size as a fraction of the variant's units; each gate
    draws a fresh size and composition (PACE resamples both at every comparison)."""
    subset_units_hint: int = Field(default=8, ge=1)
    """Units assumed when sizing a subset (sizes are clipped by the scorer to the real count)."""
    token_budget: int | None = Field(default=None, ge=1)
    """B: a control edit whose step spent more proposer tokens than this is rejected (None: no cap)."""
    front_size: int = Field(default=8, ge=2)
    """Prompt configurations kept on the Pareto front of progress vs token cost."""
    reflect_failures: int = Field(default=2, ge=0)
    """Failures of the last round given to the reflective channel (one root-cause call each)."""
    controller_max_tokens: int = Field(default=160, ge=16)
    """Completion limit of the controller's calls."""

    @model_validator(mode="after")
    def _local_models(self) -> PACEConfig:
        for name in ("model", "advisor_model", "implementer_model", "summariser_model", "controller_model"):
            value = getattr(self, name)
            if value:
                object.__setattr__(self, name, local_model_string(value))
        lo, hi = self.subset_fraction
        if not 0.0 < lo <= hi <= 1.0:
            raise ValueError(f"subset_fraction must satisfy 0 < lo <= hi <= 1, got {self.subset_fraction}")
        return self

    def role_models(self) -> dict[str, str]:
        """Role -> model string: the scaffold's three roles plus the controller."""
        models = super().role_models()
        models["controller"] = self.controller_model or self.model
        return models
