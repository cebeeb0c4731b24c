"""One island's iteration, split at the evaluation barrier into ``draft`` and ``absorb``.

``draft`` (before the step's batch evaluation) picks the parent and idea pool (normal,
backtrack or crossover), runs Algorithm 1 up to the selected hypothesis, and asks the
implementer for the program. ``absorb`` (after it) records the result under the selected idea
and in the global log, moves the working best, applies the hypothesis and idea caps, merges the
pre-backtrack pool back at the end of a backtrack, and saves a snapshot for MBB. Both touch only
their own island, so islands run them in parallel threads; momentum and interventions, which
read other islands, happen afterwards in order (``interventions``).
"""

from __future__ import annotations

import logging
import random
import threading
from dataclasses import dataclass, field

from harness.runner.context import TaskSpec

from . import hcm
from .config import PACEvolveConfig
from .momentum import sample_power_law
from .roles import Advisor, Implementer, IslandView, ProposalError, Selection, Summariser, Summary
from .state import IslandState, LogEntry, ProgramRef, SearchState, Snapshot, derive_seed


@dataclass
class Draft:
    """What an island proposes in one step (before evaluation)."""

    island: int
    """Island number."""
    parent: ProgramRef
    """The parent program."""
    parent_source: str = "normal"
    """``normal``, ``backtrack:<k>`` or ``crossover:<j>``."""
    restored_step: int = -1
    """Step of the saved state a backtrack iteration restored (-1: none)."""
    selection: Selection | None = None
    """The selected idea and hypothesis."""
    program: str | None = None
    """The candidate program (None when no candidate was produced)."""
    outcome: str = ""
    """"" while a candidate is pending; else ``repeat``, ``duplicate``, ``budget`` or ``failed:<stage>``."""
    error: str = ""
    """Why no candidate was produced."""
    idea_events: list[str] = field(default_factory=list)
    """Classification results of this step's proposals."""


@dataclass(frozen=True)
class Result:
    """The verdict on a draft's program."""

    status: str
    """Evaluation status (``ok``, ``error``, ...); a duplicate carries the earlier verdict."""
    score: float | None
    """Score when ok."""
    ref: ProgramRef
    """The program."""
    reason: str = ""
    """Why a non-ok evaluation failed."""
    evaluated: bool = True
    """False for a duplicate answered from earlier results."""
    seq: int = -1
    """Evaluation sequence number (-1 for duplicates)."""

    @property
    def ok(self) -> bool:
        """Whether the program was scored."""
        return self.status == "ok" and self.score is not None


@dataclass
class AbsorbInfo:
    """What absorbing a result changed in the pool."""

    summarized_idea: int = -1
    """Idea whose records were condensed (-1: none)."""
    pruned: list[int] = field(default_factory=list)
    """Ideas pruned."""
    evicted: list[int] = field(default_factory=list)
    """Pruned ideas evicted from the bounded failure memory."""
    backtrack_ended: bool = False
    """This step was the last iteration of a backtrack."""
    merged_back: list[int] = field(default_factory=list)
    """Ideas of the pre-backtrack pool merged back at its end (``backtrack_merge_back``)."""


class IslandEngine:
    """Runs the per-island halves of an iteration with the configured roles."""

    def __init__(
        self,
        task: TaskSpec,
        cfg: PACEvolveConfig,
        state: SearchState,
        advisor: Advisor,
        implementer: Implementer,
        summariser: Summariser,
        log: logging.Logger,
    ) -> None:
        """Bind the engine to a run."""
        self.task, self.cfg, self.state = task, cfg, state
        self.advisor, self.implementer, self.summariser = advisor, implementer, summariser
        self.log = log
        self.state_lock = threading.Lock()
        """Guards the shared parts of the state (idea versions) against parallel islands."""

    def view(self, isl: IslandState, step: int, parent: ProgramRef) -> IslandView:
        """A read-only view of the island for the roles."""
        shown, total = hcm.context_log(isl, hcm.CONTEXT_LOG_SHOWN)
        return IslandView(
            task=self.task,
            island=isl.index,
            step=step,
            seed=derive_seed(self.state.base_seed, step, isl.index),
            program=self.state.source(parent),
            program_score=parent.score,
            best_score=isl.best.score,
            ideas=tuple(i.model_copy(deep=True) for i in isl.ideas),
            pruned=tuple(isl.pruned),
            log=tuple(shown),
            log_total=total,
            pruned_evicted=isl.pruned_evicted,
            tried=frozenset(hcm.normalize(e.hypothesis) for e in isl.log)
            if self.cfg.skip_repeats
            else frozenset(),
            known=frozenset(self.state.known),
        )

    # -- before evaluation ------------------------------------------------------------------------
    def _choose_parent(self, isl: IslandState, step: int) -> tuple[ProgramRef, str, int]:
        if isl.backtrack_left > 0 and isl.snapshots:
            rng = random.Random(derive_seed(self.state.base_seed, step, isl.index, "backtrack"))
            horizon = min(len(isl.snapshots), isl.backtrack_horizon or len(isl.snapshots))
            k = sample_power_law(horizon, self.cfg.power_law_alpha, rng)
            snap = isl.snapshots[k]
            # revert to t': its idea pool, its working best, and its context log (what came
            # after it is unlearned from the prompts; the global log keeps it for the repeat filter)
            isl.ideas = self.state.load_ideas(snap.ideas)
            isl.sota = snap.sota
            isl.context_head = snap.context_head
            isl.backtrack_left -= 1
            return isl.sota, f"backtrack:{k}", snap.step
        isl.backtrack_left = 0
        if isl.crossover_parent is not None:
            parent, partner = isl.crossover_parent, isl.crossover_partner
            isl.crossover_parent, isl.crossover_partner = None, None
            return parent, f"crossover:{partner}", -1
        return isl.sota, "normal", -1

    def draft(self, isl: IslandState, step: int) -> Draft:
        """Run Algorithm 1 up to the implementation for one island.

        Role failures become a draft with ``outcome = failed:<stage>``; ``BudgetExhausted``
        propagates.
        """
        parent, source, restored = self._choose_parent(isl, step)
        d = Draft(isl.index, parent, source, restored_step=restored)
        cfg = self.cfg
        try:
            proposals = self.advisor.generate_ideas(self.view(isl, step, parent), cfg.ideas_per_generation)
        except ProposalError as e:
            proposals = []
            d.idea_events.append(f"generation_failed({e.reason[:80]})")
        for proposal in proposals:
            try:
                verdict = self.advisor.classify_idea(self.view(isl, step, parent), proposal)
            except ProposalError:
                d.idea_events.append("unclassified")
                continue
            d.idea_events.append(hcm.apply_classification(isl, verdict, step))
        try:
            if not isl.ideas:
                raise ProposalError("idea_selection", "the idea pool is empty")
            view = self.view(isl, step, parent)
            d.selection = self.advisor.select_hypothesis(view)
            idea = hcm.find_idea(isl, d.selection.idea_id)
            if idea is None:  # a custom advisor may return an unknown id
                raise ProposalError("idea_selection", f"idea {d.selection.idea_id} is not in the pool")
            if (cfg.skip_repeats and hcm.already_tried(isl, d.selection.hypothesis)) or (
                cfg.idea_filter and self.advisor.is_repeat(view, d.selection)
            ):
                d.outcome, d.error = "repeat", "the hypothesis repeats the global log"
                return d
            d.program = self.implementer.implement(view, idea, d.selection)
        except ProposalError as e:
            d.outcome, d.error = f"failed:{e.stage}", e.reason
        return d

    # -- after evaluation -------------------------------------------------------------------------
    def _outcome_text(self, result: Result, parent: ProgramRef) -> str:
        if result.ok:
            prefix = "" if result.evaluated else "same program as an earlier candidate, "
            return f"{prefix}ok, score {hcm.fmt_score(result.score)} (parent {hcm.fmt_score(parent.score)})"
        reason = " ".join(result.reason.split())[:160]
        return f"{result.status}: {reason}" if reason else result.status

    def absorb(self, isl: IslandState, d: Draft, step: int, result: Result | None) -> AbsorbInfo:
        """Fold the step's outcome into the island (Algorithm 1 lines 13-24 and the MBB snapshot).

        ``BudgetExhausted`` from a summary or pruning call propagates.
        """
        info = AbsorbInfo()
        sel, task = d.selection, self.task
        if sel is not None and result is not None:
            text = self._outcome_text(result, d.parent)
            score = result.score if result.ok else None
            hcm.record_experiment(isl, sel.idea_id, f"[step {step}] {sel.hypothesis} -> {text}", score, task)
            hcm.log_attempt(
                isl,
                LogEntry(
                    step=step, idea_id=sel.idea_id, hypothesis=sel.hypothesis, outcome=text, score=score
                ),
            )
            if result.ok and result.score is not None:
                if isl.sota.score is None or task.better(result.score, isl.sota.score):
                    isl.sota = result.ref
                if isl.best.score is None or task.better(result.score, isl.best.score):
                    isl.best = result.ref
        elif sel is not None and d.outcome:
            outcome = f"not evaluated: {d.outcome} {d.error[:160]}".strip()
            hcm.log_attempt(
                isl, LogEntry(step=step, idea_id=sel.idea_id, hypothesis=sel.hypothesis, outcome=outcome)
            )
        if sel is not None:
            info.summarized_idea = self._hypothesis_cap(isl, step, d.parent, sel.idea_id)
        if d.parent_source.startswith("backtrack") and isl.backtrack_left == 0:
            info.backtrack_ended = True
            if isl.pre_backtrack_ideas and self.cfg.backtrack_merge_back:
                info.merged_back = hcm.merge_ideas(isl, isl.pre_backtrack_ideas, step)
            isl.pre_backtrack_ideas = None
        info.pruned, info.evicted = self.idea_cap(isl, step, d.parent)
        if result is not None and result.ok:
            with self.state_lock:
                keys = self.state.save_ideas(isl.ideas)
            isl.snapshots.append(
                Snapshot(step=step, ideas=keys, sota=isl.sota, context_head=isl.context_head)
            )
        return info

    def _hypothesis_cap(self, isl: IslandState, step: int, parent: ProgramRef, idea_id: int) -> int:
        idea = hcm.find_idea(isl, idea_id)
        if idea is None or not hcm.needs_summary(idea, self.cfg.max_hypotheses_per_idea):
            return -1
        try:
            summary = self.summariser.summarize(self.view(isl, step, parent), idea)
        except ProposalError as e:
            self.log.info(
                "island %d: summary of idea %d failed (%s); keeping a plain one", isl.index, idea_id, e
            )
            last = idea.history[-1] if idea.history else ""
            summary = Summary(idea.description, f"best score {hcm.fmt_score(idea.best)}; latest: {last}")
        hcm.apply_summary(idea, summary)
        return idea_id

    def idea_cap(self, isl: IslandState, step: int, parent: ProgramRef) -> tuple[list[int], list[int]]:
        """Prune the pool back to ``max_ideas``, then bound the failure memory to ``max_abandoned_ideas``.

        The advisor chooses the ideas to prune; a fixed rule backs it up.

        Returns:
            The pruned idea ids and the ids evicted from the failure memory.
        """
        n_drop = hcm.excess_ideas(isl, self.cfg.max_ideas)
        dropped: list[int] = []
        if n_drop:
            try:
                ids, reason = self.advisor.choose_pruned(self.view(isl, step, parent), n_drop)
                dropped += hcm.drop_ideas(isl, ids[:n_drop], step, reason or "chosen by the advisor")
            except ProposalError as e:
                self.log.info(
                    "island %d: pruning answer unusable (%s); using the fallback rule", isl.index, e
                )
            n_drop = hcm.excess_ideas(isl, self.cfg.max_ideas)
            if n_drop:
                ids = hcm.fallback_prune(isl.ideas, n_drop, self.task)
                dropped += hcm.drop_ideas(isl, ids, step, "fallback: worst best score, most tested")
        return dropped, hcm.evict_abandoned(isl, self.cfg.max_abandoned_ideas)
