"""Same seed, same run: an offline agent run twice on a tiny variant with a deterministic scorer
proposes byte-identical candidates and gets identical statuses, scores and metrics.

Timing figures are the exception: metrics named ``*_seconds`` (EPLB's ``rebalance_seconds`` and
``transport_seconds``, Multi-Evolve's ``fit_seconds``, AHC's ``compile_seconds`` and
``max_case_seconds``) measure the machine, not the program. Variants whose score is a timing (the
kernel families) are left out; kuairec-tiny's scorer repeats exactly too
(``tests/environments/kuairec/test_kuairec_scorer.py``), but its training makes one of these runs
cost a minute of CPU. Both runs use two workers, as
``bench run`` does, so an agent whose choices depended on which evaluation finished first would
fail here too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.pacevolve import PACEvolveAgent, PACEvolveConfig
from agents.random_search import RandomSearchAgent, RandomSearchConfig
from harness.envs.registry import default_registry
from harness.runner.context import Budget
from harness.runner.runner import create_run, drive
from harness.sandbox.factory import make_backend

VARIANTS = ("eplb-tiny", "multi-evolve-tiny", "llm-sr-tiny", "ahc039-tiny")
"""Tiny variants with a deterministic score (EPLB's speed credit is saturated on eplb-tiny)."""
TIMING_SUFFIX = "_seconds"
"""Metrics that time the machine end so; every other metric must repeat exactly."""
EVALUATIONS = 5


def _agent(name: str) -> Any:
    if name == "pacevolve":
        return PACEvolveAgent(PACEvolveConfig(model="offline/pacevolve", islands=2, max_ideas=2))
    return RandomSearchAgent(RandomSearchConfig())


@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:
    with make_backend("local", workers=2, mode="warm", prewarm=VARIANTS) as b:
        yield b


def _run(backend: Any, agent: str, variant: str, seed: int, root: Path) -> pd.DataFrame:
    v = default_registry().get(variant)
    a = _agent(agent)
    store = create_run(
        results_dir=root / "results",
        variant=v,
        agent=a,
        seed=seed,
        budget=Budget(max_evaluations=EVALUATIONS),
        backend="local",
        workers=2,
    )
    try:
        drive(store, variant=v, agent=a, backend=backend, leaderboard_dir=root / "lb")
    finally:
        store.close()
    cands = pd.read_parquet(store.run_dir / "candidates.parquet").sort_values("seq")
    assert len(cands) == EVALUATIONS
    return cands


def _fingerprint(cands: pd.DataFrame) -> list[tuple[Any, ...]]:
    out = []
    for _, r in cands.iterrows():
        cell = r["metrics"] or {}  # a struct of the run's metric names (None: the row has none)
        metrics = {k: v for k, v in cell.items() if v is not None and not k.endswith(TIMING_SUFFIX)}
        score = None if pd.isna(r["score"]) else float(r["score"])
        out.append((r["seq"], r["program_sha256"], r["status"], score, json.dumps(metrics, sort_keys=True)))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("agent", ["pacevolve", "random-search"])
def test_one_seed_twice_is_one_run(backend: Any, agent: str, variant: str, tmp_path: Path) -> None:
    first = _fingerprint(_run(backend, agent, variant, 11, tmp_path / "a"))
    second = _fingerprint(_run(backend, agent, variant, 11, tmp_path / "b"))
    assert len({row[1] for row in first}) > 1  # the agent did propose something
    for a, b in zip(first, second, strict=True):
        ma, mb = json.loads(a[4]), json.loads(b[4])
        diff = {k: (ma.get(k), mb.get(k)) for k in ma.keys() | mb.keys() if ma.get(k) != mb.get(k)}
        assert a[:4] == b[:4] and not diff, f"seq {a[0]} differs: {a[:4]} vs {b[:4]}; metrics {diff}"
