"""Issue 22 item 5: PACE's prompt configuration and directive reach the offline proposer.

``offline/exact`` in the advisor role names one edit of the published vocabulary; the role,
requirements (PACE's directive is one), temperature and reply format decide which one and how it
is written. Also the paper's ΔÛ_P (same-round, not a monotone best-so-far) and Algorithm 1's
prompt round before every control attempt.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

import agents.pacevolve  # noqa: F401 - registers offline/exact
from agents.pace.credit import round_estimate
from agents.pace.prompt_config import REQUIREMENT_LIBRARY, ROLE_LIBRARY, PromptConfig, revise
from agents.pacevolve import prompting
from agents.pacevolve.offline_advisor import options
from agents.pacevolve.parsing import parse_edit
from agents.pacevolve.roles import IslandView, Selection
from agents.pacevolve.state import Idea, LogEntry
from harness.envs.registry import default_registry
from harness.llm.offline import answer, register_operators
from harness.runner.runner import task_spec

_NAMED = re.compile(r"Hypothesis: (edit \S+ \d+)")
BASE = PromptConfig(temperature=0.0)


def _view(ideas: tuple[Idea, ...] = (), log: tuple[LogEntry, ...] = ()) -> IslandView:
    task = task_spec(default_registry().get("eplb-tiny"))
    register_operators(task.env_id, list(task.mutations))
    pool = ideas or (Idea(id=1, description="Balance the hot experts."),)
    return IslandView(
        task=task, island=0, step=1, seed=5, program=task.initial_program, program_score=0.0,
        best_score=0.0, ideas=pool, pruned=(), log=log,
    )  # fmt: skip


def _selected(cfg: PromptConfig, view: IslandView | None = None, seed: int = 0) -> str:
    """The edit ``offline/exact`` names at the selection stage under ``cfg``."""
    msgs = cfg.apply(prompting.idea_selection(view or _view()), implementer=False)
    m = _NAMED.search(answer("exact", msgs, seed, cfg.temperature))
    assert m is not None
    return m.group(1)


def test_requirements_and_the_directive_name_the_proposed_edit() -> None:
    plain = _selected(BASE)
    assert not plain.startswith("edit swap-comparison")
    swap = BASE.model_copy(update={"requirements": (REQUIREMENT_LIBRARY[-1],)})
    assert _selected(swap).startswith("edit swap-comparison")
    scale = BASE.model_copy(update={"requirements": (REQUIREMENT_LIBRARY[-2],)})
    assert _selected(scale).startswith("edit scale-literal")
    # PACE's structural directive reaches the proposer as a requirement (agent._prompt_for).
    directive = revise(
        BASE, ["Structural change to make now: Restructure the evolvable block around packing-order."]
    )
    assert _selected(directive).startswith("edit packing-order")
    exact = revise(BASE, ["Try edit scale-literal 3 next."])
    assert _selected(exact) == "edit scale-literal 3"


def test_the_role_changes_the_proposed_edit() -> None:
    pool = (Idea(id=1, description="edit replication-criterion 1 (x)", experiments=2, best=0.7),
            Idea(id=2, description="edit packing-order 1 (y)", experiments=1, best=0.9))  # fmt: skip
    view = _view(pool)
    default = _selected(BASE, view)
    explorer = _selected(BASE.model_copy(update={"role": ROLE_LIBRARY[4]}), view)
    exploiter = _selected(BASE.model_copy(update={"role": ROLE_LIBRARY[3]}), view)
    assert default.startswith("edit replication-criterion")  # the published order
    assert explorer.split()[1] not in {"replication-criterion", "packing-order"}  # not in the pool yet
    assert exploiter.startswith("edit packing-order")  # the pool's best idea (0.9, maximised)


def test_temperature_zero_is_deterministic_and_higher_temperature_spreads() -> None:
    cold = {_selected(BASE, seed=s) for s in range(12)}
    warm = {_selected(BASE.model_copy(update={"temperature": 1.5}), seed=s) for s in range(12)}
    assert len(cold) == 1 and len(warm) >= 3
    assert cold <= warm or len(warm) > len(cold)


def test_reply_format_reaches_the_implementer_with_the_same_program() -> None:
    view = _view()
    msgs = prompting.implementation(view, view.ideas[0], Selection(1, "edit packing-order 1"))
    programs = {}
    for fmt in ("search-replace", "full-program"):
        cfg = BASE.model_copy(update={"response_format": fmt})
        text = answer("exact", cfg.apply(msgs, implementer=True), 0, 0.0)
        assert ("<<<<<<< SEARCH" in text) == (fmt == "search-replace")
        programs[fmt] = parse_edit(text, view.program, "python")
    assert programs["search-replace"] == programs["full-program"] != view.program


def test_generation_names_distinct_entries_led_by_the_requirement() -> None:
    cfg = BASE.model_copy(update={"requirements": (REQUIREMENT_LIBRARY[-1],)})
    msgs = cfg.apply(prompting.idea_generation(_view(), 3, 0), implementer=False)
    named = _NAMED.findall(answer("exact", msgs, 0, 0.0))
    assert len(named) == 3 and named[0].startswith("edit swap-comparison")
    assert len({n.split()[1] for n in named}) == 3


def test_tried_options_come_last_and_the_avoid_requirement_puts_them_after_all_untried() -> None:
    from harness.llm.offline import parse_offline_prompt

    first = _selected(BASE)
    opts = options(parse_offline_prompt(prompting.idea_selection(_view())))
    swaps = [o for o in opts if o.name == "swap-comparison"]
    log = tuple(LogEntry(step=1, idea_id=1, hypothesis=f"{o.text} ({o.shown}); x", outcome="evaluated")
                for o in [*swaps, *(o for o in opts if o.text == first)])  # fmt: skip
    view = _view(log=log)
    assert _selected(BASE, view) != first  # the default pick was tried: the next untried one
    swap = BASE.model_copy(update={"requirements": (REQUIREMENT_LIBRARY[-1],)})
    assert _selected(swap, view).startswith("edit swap-comparison")  # named entry, even if tried
    avoid = revise(swap, [REQUIREMENT_LIBRARY[4]])  # "... already tried."
    picked = _selected(avoid, view)
    assert not picked.startswith("edit swap-comparison") and picked != first


# -- ΔÛ_P as the paper defines it ------------------------------------------------------------
A, B, C = (PromptConfig(temperature=t) for t in (0.2, 0.5, 0.8))


def test_round_estimate_compares_the_two_prompts_in_the_same_round() -> None:
    # The incumbent kept: ΔÛ_P = 0 whatever the run's best did.
    assert round_estimate(A, A, [A, B, C], [0.4, 0.9, 0.1], 0.4) == (0.4, 0.4)
    # A new incumbent from island 1: its u against island 0's (the old prompt's) u this round.
    assert round_estimate(A, B, [A, B, C], [0.4, 0.9, 0.1], 0.9) == (0.4, 0.9)
    # An older front member: its front u.
    assert round_estimate(A, C, [A, B], [0.3, 0.2], 0.5) == (0.3, 0.5)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=2, max_size=4), st.integers(0, 3))
def test_round_estimate_is_not_a_best_so_far(us: list[float], pick: int) -> None:
    configs = [PromptConfig(temperature=round(0.1 * i, 1)) for i in range(len(us))]
    new = configs[min(pick, len(us) - 1)]
    u_old, u_new = round_estimate(configs[0], new, configs, us, None)
    assert u_old == us[0] and u_new == us[configs.index(new)]
