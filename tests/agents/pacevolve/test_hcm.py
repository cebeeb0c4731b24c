"""HCM bookkeeping, the caps with summarisation and pruning, failure memory, and MBB/CE state changes."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import pytest

from agents.pacevolve import hcm
from agents.pacevolve.config import PACEvolveConfig
from agents.pacevolve.interventions import update_and_intervene
from agents.pacevolve.island import IslandEngine, Result
from agents.pacevolve.momentum import Momentum
from agents.pacevolve.roles import Classification, IslandView, ProposalError, Selection, Summary
from agents.pacevolve.state import Idea, IslandState, SearchState, Snapshot
from harness.runner.context import TaskSpec


@dataclass
class ScriptedRoles:
    """Advisor + implementer + summariser with canned answers and call counters."""

    ideas: list[str] = field(default_factory=lambda: ["Use a heap"])
    verdict: Classification = Classification("new", None, "Use a heap for packing.")
    selection: Selection = Selection(1, "Replace the loop by a heap")
    drop: list[int] | None = None
    fail: set[str] = field(default_factory=set)
    calls: dict[str, int] = field(default_factory=dict)

    def _count(self, name: str) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        if name in self.fail:
            raise ProposalError(name, "scripted failure")

    def generate_ideas(self, view: IslandView, n: int) -> list[str]:
        self._count("generate")
        return self.ideas[:n]

    def classify_idea(self, view: IslandView, proposal: str) -> Classification:
        self._count("classify")
        return self.verdict

    def select_hypothesis(self, view: IslandView) -> Selection:
        self._count("select")
        return self.selection

    def is_repeat(self, view: IslandView, selection: Selection) -> bool:
        self._count("repeat")
        return False

    def choose_pruned(self, view: IslandView, n_drop: int) -> tuple[list[int], str]:
        self._count("prune")
        return (self.drop if self.drop is not None else [i.id for i in view.ideas][:n_drop]), "stale"

    def implement(self, view: IslandView, idea: Idea, selection: Selection) -> str:
        self._count("implement")
        return view.program.replace("2.5", "2.75")

    def summarize(self, view: IslandView, idea: Idea) -> Summary:
        self._count("summarize")
        return Summary("Heaps for packing.", f"best {idea.best}; {len(idea.history)} records condensed")


def make_state(task: TaskSpec, n_islands: int = 1, score: float | None = 0.1) -> SearchState:
    state = SearchState(base_seed=5, islands=[])
    ref = state.add_program(task.initial_program, score)
    state.islands = [IslandState(index=i, sota=ref, best=ref, s0=score) for i in range(n_islands)]
    return state


def engine(task: TaskSpec, state: SearchState, roles: ScriptedRoles, **cfg: object) -> IslandEngine:
    config = PACEvolveConfig(model="offline/pacevolve", **cfg)  # type: ignore[arg-type]
    return IslandEngine(task, config, state, roles, roles, roles, logging.getLogger("test"))


def test_classification_refines_adds_or_rejects(task: TaskSpec) -> None:
    isl = make_state(task).islands[0]
    assert hcm.apply_classification(isl, Classification("new", None, "Idea A."), 1) == "new:1"
    assert hcm.apply_classification(isl, Classification("refine", 1, "Idea A, refined."), 1) == "refined:1"
    assert isl.ideas[0].description == "Idea A, refined."
    assert hcm.apply_classification(isl, Classification("known_failure", 4, ""), 1) == "rejected:4"
    assert hcm.apply_classification(isl, Classification("refine", 99, "Idea B."), 1) == "new:2"
    assert [i.id for i in isl.ideas] == [1, 2]


def test_hypothesis_cap_summarises_records_into_key_findings(task: TaskSpec) -> None:
    state = make_state(task)
    roles = ScriptedRoles()
    eng = engine(task, state, roles, max_hypotheses_per_idea=3)
    isl = state.islands[0]
    hcm.add_idea(isl, "Use a heap for packing.", 0)
    for step in range(1, 5):
        roles.selection = Selection(1, f"Replace the loop by a heap, variant {step}")
        d = eng.draft(isl, step)
        assert d.outcome == "" and d.program is not None
        ref = state.add_program(d.program, 0.1 + step / 100)
        info = eng.absorb(isl, d, step, Result("ok", 0.1 + step / 100, ref))
        assert info.summarized_idea == (1 if step == 4 else -1)
    idea = isl.ideas[0]
    assert roles.calls["summarize"] == 1
    assert len(idea.history) == 1 and idea.history[0].startswith("Key findings after 4 experiments")
    assert (
        idea.experiments == 4
        and idea.best == pytest.approx(0.14)
        and idea.description == "Heaps for packing."
    )
    assert len(isl.log) == 4 and isl.best.score == pytest.approx(0.14)
    assert len(isl.snapshots) == 4


def test_summary_failure_keeps_a_plain_summary(task: TaskSpec) -> None:
    state = make_state(task)
    roles = ScriptedRoles(fail={"summarize"})
    eng = engine(task, state, roles, max_hypotheses_per_idea=1)
    isl = state.islands[0]
    idea = hcm.add_idea(isl, "Use a heap.", 0)
    idea.history = ["a", "b"]
    assert eng._hypothesis_cap(isl, 1, isl.sota, 1) == 1
    assert len(idea.history) == 1 and "latest: b" in idea.history[0]


def test_idea_cap_prunes_with_the_advisor_then_the_fallback(task: TaskSpec) -> None:
    state = make_state(task)
    roles = ScriptedRoles(drop=[2])
    eng = engine(task, state, roles, max_ideas=2)
    isl = state.islands[0]
    for k in range(4):
        hcm.add_idea(isl, f"Idea {k}.", 0)
    isl.ideas[0].best, isl.ideas[0].experiments = 0.5, 3
    isl.ideas[3].best, isl.ideas[3].experiments = 0.2, 1
    dropped, evicted = eng.idea_cap(isl, 7, isl.sota)
    # the advisor named only idea 2; the fallback drops the worst-scoring, most-tested remaining idea
    assert dropped == [2, 3] and evicted == []
    assert [i.id for i in isl.ideas] == [1, 4]
    assert [(p.id, p.step) for p in isl.pruned] == [(2, 7), (3, 7)]
    assert isl.pruned[0].reason == "stale" and isl.pruned[1].reason.startswith("fallback")
    roles.fail.add("prune")
    hcm.add_idea(isl, "Idea 5.", 8)
    assert eng.idea_cap(isl, 8, isl.sota) == ([5], [])  # fallback only; an untested idea goes first
    assert eng.idea_cap(isl, 9, isl.sota) == ([], [])


def test_failure_memory_blocks_repeats_before_any_code_is_written(task: TaskSpec) -> None:
    state = make_state(task)
    roles = ScriptedRoles(selection=Selection(1, "Replace the loop by a heap!"))
    eng = engine(task, state, roles)
    isl = state.islands[0]
    hcm.add_idea(isl, "Use a heap.", 0)
    isl.log.append(hcm.LogEntry(step=1, idea_id=1, hypothesis="replace the loop  by a heap", outcome="ok"))
    d = eng.draft(isl, 2)
    assert d.outcome == "repeat" and d.program is None and "implement" not in roles.calls
    info = eng.absorb(isl, d, 2, None)
    assert info.pruned == [] and isl.log[-1].outcome.startswith("not evaluated: repeat")


@pytest.mark.parametrize(
    ("logged", "proposed", "repeat"),
    [
        ("edit add-term 4 q8#Zr\x01 because the fit drifts", "edit add-term 4", True),
        ("edit add-term 4", "Edit `add-term` #04: different words entirely", True),
        ("edit add-term 4 same words", "edit add-term 3 same words", False),
        ("no edit named here", "No edit named here!", True),
    ],
)
def test_the_repeat_filter_keys_on_the_named_edit_not_the_free_text(
    task: TaskSpec, logged: str, proposed: str, repeat: bool
) -> None:
    state = make_state(task)
    roles = ScriptedRoles(selection=Selection(1, proposed))
    isl = state.islands[0]
    hcm.add_idea(isl, "Add a term.", 0)
    isl.log.append(hcm.LogEntry(step=1, idea_id=1, hypothesis=logged, outcome="ok"))
    d = engine(task, state, roles).draft(isl, 2)
    assert (d.outcome == "repeat") is repeat, d.outcome


def test_role_failures_become_failed_proposals(task: TaskSpec) -> None:
    state = make_state(task)
    roles = ScriptedRoles(fail={"generate", "select"})
    d = engine(task, state, roles).draft(state.islands[0], 1)
    assert d.outcome == "failed:idea_selection" and d.program is None
    roles = ScriptedRoles(fail={"implement"})
    d = engine(task, state, roles).draft(state.islands[0], 2)
    assert d.outcome == "failed:implement" and d.selection is not None


def test_merge_skips_ideas_already_held(task: TaskSpec) -> None:
    isl = make_state(task).islands[0]
    hcm.add_idea(isl, "Use a heap.", 0)
    incoming = [
        Idea(id=1, description="Use a heap."),
        Idea(id=9, description="use a HEAP"),
        Idea(id=3, description="Sort."),
    ]
    assert hcm.merge_ideas(isl, incoming, 4) == [2]
    assert isl.ideas[-1].description == "Sort." and isl.next_idea_id == 3


def test_backtrack_draws_saved_states_then_merges_the_old_pool_when_asked(task: TaskSpec) -> None:
    state = make_state(task, n_islands=1)
    roles = ScriptedRoles(verdict=Classification("refine", 1, "Use a heap."))
    eng = engine(
        task,
        state,
        roles,
        freeze_period=0,
        stagnation_threshold=0.8,
        backtrack_length=2,
        momentum_init=1.0,
        backtrack_merge_back=True,
    )
    isl = state.islands[0]
    hcm.add_idea(isl, "Use a heap.", 0)
    for step in (1, 2):
        roles.selection = Selection(1, f"heap variant {step}")
        d = eng.draft(isl, step)
        ref = state.add_program(d.program or "", 0.1)
        eng.absorb(isl, d, step, Result("ok", 0.1, ref))
        out = update_and_intervene(state, isl, eng.cfg, task, step, scored=True, evaluated=True)
    assert out.triggered and out.action == "backtrack"  # no progress: m = 0.85^2 < 0.8
    assert isl.backtrack_left == 2 and isl.backtrack_horizon == 2 and isl.pre_backtrack_ideas
    hcm.add_idea(isl, "An idea added after the last snapshot.", 2)
    isl.pre_backtrack_ideas = [i.model_copy() for i in isl.ideas]
    sources = []
    for step in (3, 4):
        roles.selection = Selection(1, f"heap variant {step}")
        d = eng.draft(isl, step)
        sources.append(d.parent_source)
        eng.absorb(isl, d, step, None)
    assert all(s.startswith("backtrack:") for s in sources) and isl.backtrack_left == 0
    assert isl.pre_backtrack_ideas is None
    assert any(i.description == "An idea added after the last snapshot." for i in isl.ideas)
    assert eng.draft(isl, 5).parent_source == "normal"


def test_crossover_takes_the_partner_best_program_and_ideas(task: TaskSpec) -> None:
    state = make_state(task, n_islands=2, score=0.0)
    cfg = PACEvolveConfig(model="offline/pacevolve", freeze_period=0, stagnation_threshold=0.5)
    stuck, strong = state.islands
    strong_ref = state.add_program(task.initial_program.replace("2.5", "9.0"), 1.0)
    strong.best = strong.sota = strong_ref
    hcm.add_idea(strong, "Partner idea.", 0)
    strong.snapshots.append(Snapshot(step=1, ideas=state.save_ideas(strong.ideas), sota=strong_ref))
    stuck.momentum = Momentum(value=0.0)
    out = update_and_intervene(state, stuck, cfg, task, 3, scored=True, evaluated=True)
    # A_i = 0, A_j = 1: w_BT = 0 and w_C = 1, so crossover is certain
    assert out.triggered and out.action == "crossover:1" and out.w_backtrack == 0.0
    assert stuck.crossover_parent == strong_ref and [i.description for i in stuck.ideas] == ["Partner idea."]
    eng = engine(task, state, ScriptedRoles(selection=Selection(1, "combine the partner idea")))
    d = eng.draft(stuck, 4)
    assert d.parent_source == "crossover:1" and d.parent == strong_ref and "9.0" in (d.program or "")
    assert stuck.crossover_parent is None


def _attempt(eng: IslandEngine, state: SearchState, roles: ScriptedRoles, step: int, score: float) -> None:
    isl = state.islands[0]
    roles.selection = Selection(1, f"heap variant {step}")
    d = eng.draft(isl, step)
    ref = state.add_program(d.program or "", score)
    eng.absorb(isl, d, step, Result("ok", score, ref))


def test_backtrack_unlearns_the_context_log_but_keeps_the_global_log(task: TaskSpec) -> None:
    state = make_state(task)
    roles = ScriptedRoles(verdict=Classification("refine", 1, "Use a heap."))
    eng = engine(task, state, roles, backtrack_length=1, power_law_alpha=50.0)  # alpha 50: k = 0 for sure
    isl = state.islands[0]
    hcm.add_idea(isl, "Use a heap.", 0)
    for step in (1, 2, 3):
        _attempt(eng, state, roles, step, 0.1)
    assert [e.hypothesis for e in hcm.context_log(isl)[0]] == [f"heap variant {s}" for s in (1, 2, 3)]
    assert isl.snapshots[0].context_head == 0 and len(isl.ideas[0].history) == 3
    isl.backtrack_left, isl.backtrack_horizon = 1, 3
    roles.selection = Selection(1, "heap variant 4")
    d = eng.draft(isl, 4)
    assert d.parent_source == "backtrack:0" and d.restored_step == 1
    # the prompt of the backtrack iteration sees the state after step 1 only
    view = eng.view(isl, 4, d.parent)
    assert [e.hypothesis for e in view.log] == ["heap variant 1"] and view.log_total == 1
    assert len(view.ideas[0].history) == 1
    ref = state.add_program(d.program or "", 0.1)
    info = eng.absorb(isl, d, 4, Result("ok", 0.1, ref))
    assert info.backtrack_ended and info.merged_back == []  # the paper unlearns; no merge-back by default
    shown, total = hcm.context_log(isl)
    assert [e.hypothesis for e in shown] == ["heap variant 1", "heap variant 4"] and total == 2
    assert len(isl.log) == 4  # the global log keeps everything ...
    roles.selection = Selection(1, "Heap variant 3!")
    assert eng.draft(isl, 5).outcome == "repeat"  # ... so unlearned attempts are still never re-run


def test_context_log_shows_the_newest_attempts_with_a_count(task: TaskSpec) -> None:
    isl = make_state(task).islands[0]
    for step in range(1, 41):
        hcm.log_attempt(isl, hcm.LogEntry(step=step, idea_id=1, hypothesis=f"h{step}", outcome="ok"))
    shown, total = hcm.context_log(isl, 30)
    assert total == 40 and [e.step for e in shown] == list(range(11, 41))
    text = hcm.render_log(shown, total)
    assert text.startswith("(10 earlier attempts not shown)") and "h40" in text and "h10 " not in text


def test_failure_memory_is_bounded_least_recently_relevant_first(task: TaskSpec) -> None:
    state = make_state(task)
    roles = ScriptedRoles()
    eng = engine(task, state, roles, max_ideas=1, max_abandoned_ideas=3)
    isl = state.islands[0]
    hcm.add_idea(isl, "Idea 1.", 0)
    for step in range(1, 6):  # one idea too many every step: idea <step> is pruned at <step>
        hcm.add_idea(isl, f"Idea {step + 1}.", step)
        roles.drop = [step]
        if step == 4:  # a new proposal matched abandoned idea 1: it is relevant again
            assert hcm.apply_classification(isl, Classification("known_failure", 1, ""), 4) == "rejected:1"
        dropped, evicted = eng.idea_cap(isl, step, isl.sota)
        assert dropped == [step] and evicted == {4: [2], 5: [3]}.get(step, [])
    assert [p.id for p in isl.pruned] == [1, 4, 5] and isl.pruned_evicted == 2
    assert isl.pruned[0].rejections == 1 and isl.pruned[0].last_relevant == 4
    text = hcm.render_pruned(isl.pruned, isl.pruned_evicted)
    assert text.startswith("(2 older abandoned ideas no longer listed)") and text.count("Abandoned idea") == 3
    assert eng.view(isl, 6, isl.sota).pruned_evicted == 2


def test_eviction_order_prefers_recent_relevance_then_more_evidence(task: TaskSpec) -> None:
    isl = make_state(task).islands[0]
    for k, (step, n_exp) in enumerate([(1, 5), (2, 1), (2, 9), (4, 0)], start=1):
        isl.pruned.append(
            hcm.PrunedIdea(id=k, description=f"d{k}", experiments=n_exp, best=None, findings="", step=step,
                           last_relevant=step)
        )  # fmt: skip
    isl.pruned[0].last_relevant = 6  # re-proposed at step 6: kept although pruned first
    assert hcm.evict_abandoned(isl, 2) == [2, 3]  # step 2 twice: the one with fewer experiments goes first
    assert [p.id for p in isl.pruned] == [1, 4] and isl.pruned_evicted == 2
    assert hcm.evict_abandoned(isl, 2) == []
    assert hcm.evict_abandoned(isl, 0) == [4, 1] and isl.pruned == []


def test_the_view_carries_the_repeat_filters_keys_and_the_known_programs(task: TaskSpec) -> None:
    """What the edit vocabulary leaves out (``IslandView.edits``) comes from the whole global log."""
    state = make_state(task)
    roles = ScriptedRoles(verdict=Classification("refine", 1, "Use a heap."))
    eng = engine(task, state, roles, backtrack_length=1, power_law_alpha=50.0)
    isl = state.islands[0]
    hcm.add_idea(isl, "Use a heap.", 0)
    for step in (1, 2):
        _attempt(eng, state, roles, step, 0.1)
    state.known = {"a" * 64: 0.1}
    isl.backtrack_left, isl.backtrack_horizon = 1, 2
    d = eng.draft(isl, 3)
    view = eng.view(isl, 3, d.parent)
    assert [e.hypothesis for e in view.log] == ["heap variant 1"]  # the backtrack unlearned step 2 ...
    assert view.tried == {"heap variant 1", "heap variant 2"}  # ... but the repeat filter has not
    assert view.known == {"a" * 64}
    no_filter = engine(task, state, roles, skip_repeats=False).view(isl, 3, d.parent)
    assert no_filter.tried == frozenset()
