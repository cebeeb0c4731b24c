"""Synthetic run stores for compare / report tests (real parquet files in the real layout)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness.envs.manifest import Direction
from harness.results.leaderboard import append_leaderboard_row
from harness.results.records import CandidateRow, LeaderboardRow, arrow_schema
from harness.scoring.progress import normalized_progress

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def write_run(
    results: Path,
    leaderboards: Path,
    *,
    run_id: str,
    agent: str,
    seed: int,
    scores: Sequence[float | None],
    variant: str = "toy",
    env_hash: str = "h1",
    maximize: bool = True,
    y_init: float = 0.0,
    y_target: float = 10.0,
    cost_per_eval: float = 0.0,
    seconds_per_eval: float = 1.0,
    finished_at: str = "2026-01-02T00:00:00+00:00",
    config: dict[str, Any] | None = None,
    models: dict[str, str] | None = None,
    budget: dict[str, Any] | None = None,
    family: str = "toy",
    label: str | None = None,
) -> None:
    """One run: candidates.parquet (None = failed evaluation) and its leaderboard row."""
    rows = []
    for i, s in enumerate(scores):
        rows.append(
            {
                "run_id": run_id,
                "seq": i,
                "iteration": i,
                "thread": 0,
                "parent_id": None,
                "program_sha256": f"{i:064x}",
                "status": "ok" if s is not None else "error",
                "score": s,
                "metrics_json": "{}",
                "reason": "" if s is not None else "ValueError: boom",
                "duration_setup": 0.0,
                "duration_candidate": 0.0,
                "duration_score": 0.0,
                "duration_total": seconds_per_eval,
                "tokens_in": 0,
                "tokens_out": 0,
                "cost_usd": cost_per_eval,
                "started_at": (T0 + timedelta(seconds=i * seconds_per_eval)).isoformat(),
                "finished_at": (T0 + timedelta(seconds=(i + 1) * seconds_per_eval)).isoformat(),
                "env_id": variant,
                "env_hash": env_hash,
                "attempts": 1,
                "backend": "local",
            }
        )
    d = results / run_id
    d.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema(CandidateRow)), d / "candidates.parquet")
    ok = [s for s in scores if s is not None]
    best = (max(ok) if maximize else min(ok)) if ok else None
    append_leaderboard_row(
        leaderboards,
        LeaderboardRow(
            run_id=run_id,
            family=family,
            variant=variant,
            env_version="1.0.0",
            env_hash=env_hash,
            agent=agent,
            seed=seed,
            best_score=best,
            n_evaluations=len(scores),
            n_ok=len(ok),
            progress=normalized_progress(best, y_init, y_target),
            direction=Direction.MAXIMIZE if maximize else Direction.MINIMIZE,
            finished_at=finished_at,
            cost_usd=cost_per_eval * len(scores),
            agent_config_json=json.dumps(config or {}, sort_keys=True),
            models_json=json.dumps(models or {}, sort_keys=True),
            budget_json=json.dumps(budget or {}, sort_keys=True),
            label=label,
        ),
    )


class Store:
    """A results directory and a leaderboards directory to write synthetic runs into."""

    def __init__(self, root: Path) -> None:
        self.results = root / "results"
        self.leaderboards = root / "leaderboards"

    def run(self, **kw: Any) -> None:
        write_run(self.results, self.leaderboards, **kw)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path)
