"""After each step, in island order: update momentum (MBB) and, on a trigger, backtrack or cross over (CE).

This runs after every island has absorbed its result, so crossover sees the partners' state at
the same point of the search whatever the thread timing was.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

from harness.runner.context import TaskSpec

from . import hcm
from .collaboration import BACKTRACK, action_weights, choose_action
from .config import PACEvolveConfig
from .momentum import progress_of, should_intervene
from .state import IslandState, SearchState, Snapshot, derive_seed


@dataclass
class MomentumOutcome:
    """The MBB / CE numbers of one island in one step (for telemetry)."""

    relative_progress: float | None = None
    """R_t of the update (None: no update this step)."""
    triggered: bool = False
    """Whether an intervention triggered."""
    action: str = ""
    """``backtrack``, ``crossover:<j>`` or ""."""
    w_backtrack: float | None = None
    """Backtrack weight at the trigger."""
    w_crossover_json: str = "{}"
    """Crossover weights by partner at the trigger (JSON)."""


def best_snapshot(isl: IslandState, task: TaskSpec) -> Snapshot | None:
    """The island's saved state with the best working program (direction-aware; earliest on ties)."""
    best: Snapshot | None = None
    for snap in isl.snapshots:
        score = snap.sota.score
        if score is None:
            continue
        if best is None or best.sota.score is None or task.better(score, best.sota.score):
            best = snap
    return best


def start_backtrack(isl: IslandState, cfg: PACEvolveConfig) -> bool:
    """Arm a backtrack: the next ``backtrack_length`` iterations draw their state from the saved ones.

    Each of them restores a saved state's idea pool, working best and context log (see
    ``IslandEngine``), so the attempts after it are unlearned from the prompts.

    Returns:
        False when the island has no saved state yet (nothing happens).
    """
    if not isl.snapshots:
        return False
    isl.backtrack_left = cfg.backtrack_length
    isl.backtrack_horizon = len(isl.snapshots)
    if cfg.backtrack_merge_back:
        isl.pre_backtrack_ideas = [i.model_copy(deep=True) for i in isl.ideas]
    return True


def start_crossover(
    state: SearchState, isl: IslandState, partner: IslandState, task: TaskSpec, step: int
) -> None:
    """One-step crossover: the partner's best program parents the next iteration, its best pool joins ours."""
    isl.crossover_parent = partner.best
    isl.crossover_partner = partner.index
    snap = best_snapshot(partner, task)
    hcm.merge_ideas(isl, state.load_ideas(snap.ideas) if snap is not None else partner.ideas, step)


def island_progress(isl: IslandState, task: TaskSpec) -> float:
    """The island's absolute progress A = (s_0 - s_t) / (s_0 - r) from its own initial score s_0."""
    return progress_of(isl.best.score, isl.s0, task)


def update_and_intervene(
    state: SearchState,
    isl: IslandState,
    cfg: PACEvolveConfig,
    task: TaskSpec,
    step: int,
    scored: bool,
    evaluated: bool,
) -> MomentumOutcome:
    """Fold the island's best into its momentum and intervene when it stagnates.

    The island's first scored program (normally the initial one, measured at the start) sets
    its s_0 and is not a momentum update (Alg. 2 line 2 initialises from it).

    Args:
        state: The whole search state (partners are read from it).
        isl: The island.
        cfg: Configuration.
        task: The task (direction and target r).
        step: Current step.
        scored: Whether this step's candidate was scored ok.
        evaluated: Whether a candidate was evaluated at all this step.

    Returns:
        The numbers for telemetry.
    """
    out = MomentumOutcome()
    if isl.s0 is None:
        if isl.best.score is not None:
            isl.s0 = isl.best.score
        return out
    if not (scored or (cfg.stagnation_counts_failures and evaluated)):
        return out
    out.relative_progress = isl.momentum.update(island_progress(isl, task), cfg.momentum_decay)
    isl.completed += 1
    if not cfg.backtracking or isl.backtrack_left > 0:
        return out
    if not should_intervene(
        isl.momentum.value, cfg.stagnation_threshold, isl.completed, isl.last_intervention, cfg.freeze_period
    ):
        return out
    out.triggered = True
    partners: dict[int, float] = {}
    if cfg.crossover:
        partners = {o.index: island_progress(o, task) for o in state.islands if o.index != isl.index}
    weights = action_weights(island_progress(isl, task), partners)
    out.w_backtrack = weights.backtrack
    out.w_crossover_json = json.dumps({str(j): w for j, w in weights.crossover.items()})
    rng = random.Random(derive_seed(state.base_seed, step, isl.index, "intervention"))
    action, partner = choose_action(weights, rng)
    if action == BACKTRACK:
        out.action = BACKTRACK if start_backtrack(isl, cfg) else "backtrack:none-saved"
    else:
        assert partner is not None
        start_crossover(state, isl, state.islands[partner], task, step)
        out.action = f"crossover:{partner}"
    isl.last_intervention = isl.completed
    isl.interventions += 1
    return out
