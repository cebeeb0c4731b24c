"""PACE's own telemetry: one row per controller event in ``pace.jsonl`` / ``pace.parquet``."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

PACE_STEM = "pace"
"""File stem of the PACE telemetry journal in the run directory."""

Event = Literal[
    "prompt_round", "saturation", "control_edit", "safety", "gate", "commit", "rollback", "return_fast"
]  # fmt: skip
"""What a row records."""


class PACERow(BaseModel):
    """One controller event."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    step: int
    """Agent step."""
    event: Event
    """``prompt_round`` (a fast step), ``saturation`` (the trigger's verdict), ``control_edit`` (a slow
    step's proposal, or its rejection before evaluation), ``safety`` (a program blocked by a safety
    gate), ``gate`` (the validation gate), ``commit`` / ``rollback`` (the post-commit full
    evaluation's verdict), ``return_fast`` (back to the fast timescale after rejected edits)."""
    timescale: Literal["fast", "slow"]
    """Timescale of the step."""
    evaluations: int = 0
    """Evaluations used in the run so far."""
    u_before: float | None = None
    """Validated progress (best full-evaluation u) before the step."""
    u_after: float | None = None
    """Validated progress after the step."""
    delta_u: float | None = None
    """ΔÛ_P of a prompt round."""
    epsilon: float | None = None
    """ε of the trigger."""
    saturated: bool | None = None
    """The trigger's verdict."""
    channels: str = ""
    """Channels of the round's prompt candidates, by island (``seed mutation reflective ...``)."""
    island_u: str = ""
    """Progress of each island's candidate in the round (space separated)."""
    island_tokens: str = ""
    """Proposer tokens each island spent in the round."""
    front_size: int = 0
    """Pareto-front size after the round."""
    prompt_json: str = ""
    """The incumbent prompt configuration after the event."""
    control_json: str = ""
    """The control logic after the event (editable fields)."""
    edit_json: str = ""
    """A proposed control edit (fields set and directive)."""
    subset: str = ""
    """Validation subset (``<seed>-<size>`` of the variant's units; ``full`` without subsets)."""
    u_old: float | None = None
    """Incumbent's progress on the validation subset."""
    u_new: float | None = None
    """Candidate's progress on the same subset."""
    delta: float | None = None
    """δ of the gate."""
    accepted: bool | None = None
    """Gate or post-commit verdict."""
    reason: str = ""
    """Why (one line)."""
    tokens: int = 0
    """Proposer and controller tokens spent in the step."""
