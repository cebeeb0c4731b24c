"""``advisor_rule = bandit-ucb``: the non-learning adaptive baseline (UCB1 over edit families, no weights).

On ``selftest-bandit`` (no edit vocabulary: the arms are ``bandit_menu`` texts, whose first
character picks the instrument's arm) it concentrates on the best-paying text within a few steps,
and a seeded run repeats exactly. On a real vocabulary (``eplb-tiny``'s edit families) it prefers
the family that pays more, never loading a model.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from agents.learning.bandit import BanditAdvisor
from agents.pacevolve.roles import IslandView
from agents.pacevolve.state import Idea
from agents.registry import get_agent_class
from harness.envs.registry import default_registry
from harness.llm.offline import register_operators
from harness.runner.context import BudgetExhausted
from harness.runner.runner import task_spec

MENU = ["c", "e", "d", "g"]
"""First characters 'c', 'e', 'd', 'g': the instrument's arms 3, 5, 4, 7 (payoff 0.1, 0.2, 0.6, 1.0)."""
KNOBS = {
    "advisor_rule": "bandit-ucb",
    "implementer_model": "offline/pacevolve",
    "islands": 4,
    "backtracking": False,
}
STEPS = 4


def _hypotheses(run_dir: Path) -> list[str]:
    rows = pd.read_parquet(run_dir / "pacevolve_iterations.parquet").sort_values(["step", "island"])
    return [str(h) for h in rows["hypothesis"]]


def test_bandit_ucb_prefers_the_best_paying_text_on_selftest_bandit(run_agent: Callable[..., Any]) -> None:
    """A real run (sandboxed evaluations): every arm once, then mostly the best one."""
    cls = get_agent_class("pacevolve++")
    agent = cls(cls.Config.model_validate({**KNOBS, "bandit_menu": MENU}))
    out, run_dir = run_agent(agent, "selftest-bandit", max_evaluations=1 + STEPS * 4, seed=3)
    assert out.info.status == "finished" and out.info.best_score == 1.0
    summary = out.info.agent_summary
    assert "no weights" in summary["advisor"] and "adapter_version" not in summary
    assert json.loads((run_dir / "run.json").read_text())["models"]["advisor"] == "rule:bandit-ucb"
    firsts = [h[0] for h in _hypotheses(run_dir)]
    assert sorted(firsts[:4]) == sorted(MENU)  # the first step tries every arm once
    late = Counter(firsts[4:])
    assert late.most_common(1)[0][0] == "g" and late["g"] >= len(firsts[4:]) // 2, late
    assert summary["bandit_pulls"]["g"] == max(summary["bandit_pulls"].values())
    assert summary["reward_last_quarter"] >= summary["reward_first_quarter"] + 0.5


def test_bandit_ucb_runs_are_deterministic_per_seed(fake_ctx: type[Any], task: Any) -> None:
    """The whole agent loop (in memory, ``offline/exact``): a seed repeats its hypotheses exactly."""
    cls = get_agent_class("pacevolve++")
    cfg = cls.Config.model_validate({**KNOBS, "implementer_model": "offline/exact"})
    seen = []
    for seed in (5, 5, 6):
        ctx = fake_ctx(task, max_evaluations=1 + 6 * 4, seed=seed)
        agent = cls(cfg)
        with contextlib.suppress(BudgetExhausted):
            agent.run(ctx)
        seen.append(([e.proposal.source for e in ctx.history], agent.run_summary()["bandit_pulls"]))
    assert seen[0] == seen[1] and len(seen[0][0]) > 8  # the toy vocabulary runs out of untried edits
    assert set(seen[0][1]) == {"offset", "scale-literal"}


def _view(island: int, step: int) -> IslandView:
    task = task_spec(default_registry().get("eplb-tiny"))
    register_operators(task.env_id, list(task.mutations))
    return IslandView(
        task=task, island=island, step=step, seed=1000 * step + island, program=task.initial_program,
        program_score=0.0, best_score=0.0, ideas=(Idea(id=1, description="bandit"),), pruned=(), log=(),
    )  # fmt: skip


def test_bandit_ucb_prefers_the_better_edit_family_of_a_real_vocabulary() -> None:
    """Synthetic payoffs per family of eplb-tiny's vocabulary: the best family gets most late pulls."""
    families = sorted({e.name for e in _view(0, 1).edits()[0]})
    assert len(families) >= 2
    best = families[-1]
    bandit = BanditAdvisor(seed=7, c=1.0, reward_lo=-1.0, reward_hi=5.0)
    picks: list[str] = []
    for step in range(1, 31):
        chosen = {i: bandit.select_hypothesis(_view(i, step)).hypothesis.split()[1] for i in range(4)}
        picks += chosen.values()
        bandit.observe(step, {i: 4.0 if f == best else 1.0 for i, f in chosen.items()})
    assert set(picks[: len(families)]) == set(families)  # every family is tried first
    late = Counter(picks[len(picks) // 2 :])
    assert late.most_common(1)[0][0] == best and late[best] > len(picks) // 4, late
