"""Fixtures shared by the agent tests: offline litellm, a toy task and in-memory context, and
in-process runs on real tiny variants."""

from __future__ import annotations

import copy
import json
import logging
import os
import random
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from harness.envs.manifest import Direction, Language, Progress
from harness.evaluation.result import EvalResult, Status, program_sha256
from harness.program import ReplaceSnippet
from harness.runner.context import AgentContext, Budget, BudgetExhausted, Evaluated, Proposal, TaskSpec

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm is imported lazily, later

PROGRAM = """import math

# EVOLVE-BLOCK-START
def f(x):
    return 2.5 * x + 1
# EVOLVE-BLOCK-END
"""


def make_task(maximize: bool = True, y_init: float = 0.0, y_target: float = 1.0) -> TaskSpec:
    """A small task for unit tests (no sandbox involved)."""
    ops = (ReplaceSnippet("offset", "x + 1", ["x + 2", "x - 1", "x * x"]),)
    return TaskSpec(
        env_id="unit-tiny",
        prompt="Make f better.",
        initial_program=PROGRAM,
        language=Language.PYTHON,
        entry_point="f",
        signature="f(x: float) -> float",
        direction=Direction.MAXIMIZE if maximize else Direction.MINIMIZE,
        combined="score",
        metrics=(),
        progress=Progress(y_init=y_init, y_target=y_target),
        mutations=ops,
    )


def toy_score(source: str) -> float | None:
    """Score of a unit-task program: closeness of its slope to 4 (None when there is no slope)."""
    m = re.search(r"return (-?[0-9.]+(?:e-?\d+)?) \*", source)
    if m is None:
        return None
    return max(0.0, 1.0 - abs(float(m.group(1)) - 4.0) / 4.0)


class FakeContext(AgentContext):
    """An in-memory runner context scoring programs with :func:`toy_score` (no sandbox).

    ``journal`` (seq -> program sha) replays like the runner; ``crash_at`` raises KeyboardInterrupt
    before evaluating that sequence number (a simulated kill).
    """

    def __init__(
        self,
        task: TaskSpec,
        max_evaluations: int,
        seed: int = 0,
        run_dir: Path | None = None,
        checkpoint: dict[str, Any] | None = None,
        journal: dict[int, str] | None = None,
        crash_at: int | None = None,
        max_cost_usd: float | None = None,
    ) -> None:
        self.task, self.seed, self.run_dir = task, seed, run_dir
        self.budget = Budget(max_evaluations=max_evaluations, max_cost_usd=max_cost_usd)
        self.rng = random.Random(seed)
        self.log = logging.getLogger("agent.test")
        self.workers = 2
        self.next_seq = 0
        self.history: list[Evaluated] = []
        self.checkpoint = checkpoint
        self.journal = dict(journal or {})
        self.crash_at = crash_at
        self.cost = 0.0
        self.replayed = 0
        self._best: Evaluated | None = None

    def evaluate(self, proposals: Sequence[Proposal]) -> list[Evaluated]:
        if self.out_of_budget():
            raise BudgetExhausted("budget exhausted")
        out = []
        for p in list(proposals)[: self.remaining_evaluations]:
            if self.crash_at is not None and self.next_seq >= self.crash_at:
                raise KeyboardInterrupt
            sha = program_sha256(p.source)
            score = toy_score(p.source)
            if score is not None and not self.task.maximize:
                score = 1.0 - score  # the same task as a minimisation: 0 is perfect
            status = Status.OK if score is not None else Status.ERROR
            res = EvalResult(
                status=status,
                score=score,
                env_id="unit-tiny",
                env_version="1",
                env_hash="h",
                program_sha256=sha,
            )
            replay = self.journal.get(self.next_seq) == sha
            self.replayed += replay
            ev = Evaluated(self.next_seq, p, res, replayed=replay)
            self.journal[self.next_seq] = sha
            self.next_seq += 1
            self.cost += 0.0 if replay else p.cost_usd
            if ev.ok and (self._best is None or self.task.better(score or 0, self._best.result.score or 0)):
                self._best = ev
            self.history.append(ev)
            out.append(ev)
        return out

    @property
    def remaining_evaluations(self) -> int:
        return max(0, self.budget.max_evaluations - self.next_seq)

    def out_of_budget(self) -> bool:
        cap = self.budget.max_cost_usd
        return self.remaining_evaluations <= 0 or (cap is not None and self.cost >= cap)

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        self.checkpoint = {"seq": self.next_seq, "state": json.loads(json.dumps(state))}

    def load_checkpoint(self) -> dict[str, Any] | None:
        if self.checkpoint is None:
            return None
        state = copy.deepcopy(self.checkpoint["state"])
        state["_seq"] = self.checkpoint["seq"]
        return state

    def skip_to(self, seq: int) -> None:
        self.next_seq = max(self.next_seq, seq)

    @property
    def best(self) -> Evaluated | None:
        return self._best

    def add_llm_usage(self, tokens_in: int, tokens_out: int, cost_usd: float) -> None:
        self.cost += cost_usd


@pytest.fixture
def task() -> TaskSpec:
    """A maximised unit-test task with progress bounds 0 -> 1."""
    return make_task()


@pytest.fixture
def task_factory() -> Callable[..., TaskSpec]:
    """``make_task(maximize, y_init, y_target)``."""
    return make_task


@pytest.fixture
def fake_ctx() -> type[FakeContext]:
    """The in-memory context class."""
    return FakeContext


@pytest.fixture
def run_agent(tmp_path: Path) -> Callable[..., Any]:
    """Run an agent in-process on a variant with the local sandbox; returns (outcome, run_dir)."""
    from harness.envs.registry import default_registry
    from harness.runner.context import Budget
    from harness.runner.runner import create_run, drive
    from harness.sandbox.factory import make_backend

    def run(agent: Any, env: str, max_evaluations: int, seed: int = 1, **budget: Any) -> tuple[Any, Path]:
        v = default_registry().get(env)
        store = create_run(
            results_dir=tmp_path / "results",
            variant=v,
            agent=agent,
            seed=seed,
            budget=Budget(max_evaluations=max_evaluations, **budget),
            backend="local",
            workers=2,
        )
        try:
            with make_backend("local", workers=2, mode="warm", prewarm=(v.id,)) as b:
                out = drive(store, variant=v, agent=agent, backend=b, leaderboard_dir=tmp_path / "lb")
        finally:
            store.close()
        return out, store.run_dir

    return run
