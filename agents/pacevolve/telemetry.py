"""Per-iteration telemetry (``pacevolve_iterations.jsonl`` / ``.parquet``) and the step hook.

One row per island per step, whether or not a candidate was evaluated: the parent's origin
(normal, backtrack, crossover), the idea and hypothesis, what became of the proposal (evaluated,
duplicate, a failed stage and why), the MBB / CE numbers (R, m, A, weights, action) and the idea
pool events. Failed proposals are recorded here; evaluated ones also appear in the runner's
``candidates.parquet`` (joined by ``seq``). A step redone after a resume appends its rows again;
the Parquet snapshot keeps the last row per (step, island).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

ITERATIONS_STEM = "pacevolve_iterations"
"""File stem of the telemetry journal."""


class IterationRow(BaseModel):
    """What one island did in one step."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    step: int
    """Agent step (1-based; the initial program is step 0)."""
    island: int
    """Island number."""
    parent_sha256: str
    """Parent program."""
    parent_source: str
    """``normal``, ``backtrack:<k>`` (k = saved state drawn) or ``crossover:<j>`` (partner island)."""
    outcome: str
    """``evaluated``, ``duplicate`` (program already scored), ``repeat`` (hypothesis in the
    global log), ``budget`` (cut from the batch), or ``failed:<stage>``."""
    error: str = ""
    """Why a proposal failed (masked)."""
    idea_id: int = -1
    """Selected idea (-1: none)."""
    hypothesis: str = ""
    """Selected hypothesis."""
    idea_events: str = ""
    """Classification results, e.g. ``new:4 refined:2 rejected:1``."""
    seq: int = -1
    """Evaluation sequence number (-1: not evaluated)."""
    program_sha256: str = ""
    """Candidate program ("" when none was produced)."""
    status: str = ""
    """Evaluation status."""
    score: float | None = None
    """Candidate score."""
    island_best: float | None = None
    """Island's best score after the step."""
    sota_score: float | None = None
    """Score of the island's working best (the next parent) after the step."""
    relative_progress: float | None = None
    """R_t of this step's momentum update (None: no update)."""
    momentum: float = 0.0
    """m after the step."""
    absolute_progress: float = 0.0
    """A of the island after the step."""
    triggered: bool = False
    """Whether MBB triggered an intervention."""
    action: str = ""
    """``backtrack``, ``crossover:<j>`` or "" (none)."""
    w_backtrack: float | None = None
    """CE weight of backtracking at the trigger."""
    w_crossover_json: str = "{}"
    """CE weights of crossover by partner, as JSON."""
    pool_size: int = 0
    """Active ideas after the step."""
    pruned_ids: str = ""
    """Ideas pruned this step (space-separated)."""
    summarized_idea: int = -1
    """Idea whose records were condensed this step (-1: none)."""
    tokens_in: int = 0
    """Prompt tokens attributed to this candidate."""
    tokens_out: int = 0
    """Completion tokens attributed to this candidate."""
    cost_usd: float = 0.0
    """Cost attributed to this candidate."""


@runtime_checkable
class StepObserver(Protocol):
    """Called at the synchronisation point after each step (e.g. an RL trainer of the advisor).

    At that point every island's candidate has been evaluated and merged into the population;
    the next step has not started.
    """

    def on_step(self, step: int, rows: list[IterationRow]) -> None:
        """Receive the step's rows, one per island."""
        ...
