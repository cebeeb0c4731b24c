"""Per-iteration telemetry (``pacevolve_iterations``), the intervention log and the step hook.

The intervention log is ``pacevolve_events``.

One row per island per step, whether or not a candidate was evaluated: the parent's origin
(normal, backtrack, crossover), the idea and hypothesis, what became of the proposal (evaluated,
duplicate, a failed stage and why), the MBB / CE numbers (R, m, A, weights, action) and the idea
pool events. Failed proposals are recorded here; evaluated ones also appear in the runner's
``candidates.parquet`` (joined by ``seq``). A step redone after a resume appends its rows again;
the Parquet snapshot keeps the last row per (step, island).

The event log has one row per intervention, derived from the iteration rows: MBB / CE actions
(``backtrack``, ``crossover``), each backtrack iteration's revert to a saved state (``revert``)
and the end of a backtrack (``backtrack_end``), and the HCM consolidations (``hyp_summary``:
K_hyp records condensed; ``idea_prune``: pool cut back to K_idea; ``memory_evict``: failure
memory cut back to its cap). ``evaluations`` says when: the run's evaluation count after the step.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

ITERATIONS_STEM = "pacevolve_iterations"
"""File stem of the telemetry journal."""
EVENTS_STEM = "pacevolve_events"
"""File stem of the intervention log."""
EVENT_KINDS = (
    "backtrack",
    "crossover",
    "revert",
    "backtrack_end",
    "hyp_summary",
    "idea_prune",
    "memory_evict",
)
"""Kinds of intervention events."""


class IterationRow(BaseModel):
    """What one island did in one step."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    step: int
    """Agent step (1-based; the initial program is step 0)."""
    island: int
    """Island number."""
    parent_sha256: str
    """Parent program."""
    evaluations: int = 0
    """Evaluations made in the run after this step (the initial program included)."""
    parent_source: str
    """``normal``, ``backtrack:<k>`` (k = saved state drawn) or ``crossover:<j>`` (partner island)."""
    restored_step: int = -1
    """Step of the saved state a backtrack iteration restored (-1: none)."""
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
    """A of the island after the step, from its own s_0."""
    s0: float | None = None
    """The island's initial score s_0 (None until it has a scored program)."""
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
    evicted_ids: str = ""
    """Pruned ideas evicted from the bounded failure memory this step (space-separated)."""
    backtrack_ended: bool = False
    """This step was the last iteration of a backtrack."""
    tokens_in: int = 0
    """Prompt tokens attributed to this candidate."""
    tokens_out: int = 0
    """Completion tokens attributed to this candidate."""
    cost_usd: float = 0.0
    """Cost attributed to this candidate."""


class EventRow(BaseModel):
    """One intervention: what happened to which island, and when."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    step: int
    """Agent step."""
    island: int
    """Island number."""
    evaluations: int
    """Evaluations made in the run after the step."""
    kind: str
    """One of :data:`EVENT_KINDS`."""
    detail: str = ""
    """Partner, saved state, idea ids, weights."""
    momentum: float = 0.0
    """m after the step."""
    absolute_progress: float = 0.0
    """A of the island after the step."""


def events_of(row: IterationRow) -> list[EventRow]:
    """The intervention events of one iteration row (empty when nothing happened)."""
    out: list[tuple[str, str]] = []
    if row.action.startswith("backtrack"):
        out.append(("backtrack", f"{row.action}; w_BT {_fmt(row.w_backtrack)}, w_C {row.w_crossover_json}"))
    elif row.action.startswith("crossover"):
        partner = row.action.split(":", 1)[1]
        out.append(
            ("crossover", f"partner {partner}; w_BT {_fmt(row.w_backtrack)}, w_C {row.w_crossover_json}")
        )
    if row.parent_source.startswith("backtrack:"):
        k = row.parent_source.split(":", 1)[1]
        out.append(("revert", f"saved state {k} (after step {row.restored_step})"))
    if row.backtrack_ended:
        out.append(("backtrack_end", ""))
    if row.summarized_idea >= 0:
        out.append(("hyp_summary", f"idea {row.summarized_idea}"))
    if row.pruned_ids:
        out.append(("idea_prune", f"ideas {row.pruned_ids}"))
    if row.evicted_ids:
        out.append(("memory_evict", f"abandoned ideas {row.evicted_ids}"))
    return [
        EventRow(
            step=row.step,
            island=row.island,
            evaluations=row.evaluations,
            kind=kind,
            detail=detail,
            momentum=row.momentum,
            absolute_progress=row.absolute_progress,
        )
        for kind, detail in out
    ]


def _fmt(x: float | None) -> str:
    return "none" if x is None else f"{x:.4g}"


@runtime_checkable
class StepObserver(Protocol):
    """Called at the synchronisation point after each step (e.g. an RL trainer of the advisor).

    At that point every island's candidate has been evaluated and merged into the population;
    the next step has not started.
    """

    def on_step(self, step: int, rows: list[IterationRow]) -> None:
        """Receive the step's rows, one per island."""
        ...
