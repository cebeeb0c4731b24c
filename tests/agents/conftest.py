"""Fixtures shared by the agent tests: in-process runs on real tiny variants."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm is imported lazily, later


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
