"""Per-family leaderboards: one Parquet row per finished run, and their per-agent summary.

``leaderboards/<family>.parquet`` is rewritten atomically under an exclusive ``flock`` on the
sidecar ``leaderboards/<family>.parquet.lock``, so concurrent runs finishing at the same time
never lose each other's rows and readers never see a partial file.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, cast

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.envs.manifest import Direction, Progress
from harness.envs.subset import is_reduced_id
from harness.evaluation.result import Status
from harness.scoring.progress import normalized_progress

from .atomic import atomic_write_parquet, lock_file, makedirs_durable, unlock_file
from .records import CandidateRow, LeaderboardRow, RunInfo, arrow_schema, utc_now_iso
from .summary import REQUIRED_COLUMNS, summarize_records
from .summary import SUMMARY_COLUMNS as SUMMARY_COLUMNS
from .summary import leaderboard_path as leaderboard_path

LEADERBOARD_COLUMNS: tuple[str, ...] = tuple(LeaderboardRow.model_fields)
"""Columns of a leaderboard file, in order."""


class VariantLike(Protocol):
    """What :func:`build_leaderboard_row` needs of a variant (satisfied by ``envs.registry.Variant``)."""

    @property
    def id(self) -> str:
        """Variant id."""
        ...

    @property
    def hash(self) -> str:
        """Variant content hash."""
        ...

    @property
    def direction(self) -> Direction:
        """Direction of the combined score."""
        ...

    @property
    def progress(self) -> Progress:
        """Progress bounds."""
        ...


def append_leaderboard_row(directory: Path, row: LeaderboardRow, *, lock_timeout: float = 60.0) -> Path:
    """Add a run to its family's leaderboard, replacing any row with the same ``run_id``.

    Idempotent: appending the same row twice leaves one copy, in its original position.

    Args:
        directory: The leaderboards directory (created if needed).
        row: The run's row; ``row.family`` selects the file.
        lock_timeout: Seconds to wait for a concurrent writer.

    Returns:
        Path of the leaderboard file.

    Raises:
        ValueError: If ``row.family`` is not a plain name.
        LockHeldError: If another writer holds the lock for longer than ``lock_timeout`` (a
            ``TimeoutError``).
        pyarrow.ArrowInvalid: If the existing file is unreadable.
        OSError: If the file cannot be written; the previous file is then intact.
    """
    path = leaderboard_path(directory, row.family)
    makedirs_durable(path.parent)
    schema = arrow_schema(LeaderboardRow)
    new = row.model_dump(mode="json")
    lock_fd = lock_file(path.with_name(path.name + ".lock"), timeout=lock_timeout, stamp=f"pid {os.getpid()}")
    try:
        records: list[dict[str, Any]] = []
        if path.exists():
            records = [{k: r.get(k) for k in schema.names} for r in pq.read_table(path).to_pylist()]
        kept: list[dict[str, Any]] = []
        replaced = False
        for r in records:
            if r["run_id"] != row.run_id:
                kept.append(r)
            elif not replaced:  # first occurrence keeps its position; stray duplicates are dropped
                kept.append(new)
                replaced = True
        if not replaced:
            kept.append(new)
        atomic_write_parquet(path, pa.Table.from_pylist(kept, schema=schema))
    finally:
        unlock_file(lock_fd)
    return path


def load_leaderboard(directory: Path, family: str) -> pd.DataFrame:
    """Read a family's leaderboard.

    Args:
        directory: The leaderboards directory.
        family: Family name.

    Returns:
        One row per run with :data:`LEADERBOARD_COLUMNS` (an empty, typed frame if absent).

    Raises:
        ValueError: If ``family`` is not a plain name.
        pyarrow.ArrowInvalid: If the file is unreadable.
    """
    path = leaderboard_path(directory, family)
    if not path.exists():
        return arrow_schema(LeaderboardRow).empty_table().to_pandas()
    return pq.read_table(path).to_pandas().reindex(columns=list(LEADERBOARD_COLUMNS))


def build_leaderboard_row(
    info: RunInfo,
    rows: Sequence[CandidateRow],
    variant: VariantLike,
    *,
    finished_at: str | None = None,
    program_paths: Mapping[str, str] | None = None,
) -> LeaderboardRow:
    """Summarise a run's journal into its leaderboard row.

    The best score is the direction-aware best over ``ok`` evaluations; progress is measured
    against the run's recorded bounds (``RunInfo.progress_bounds``: its draw's), else the
    variant's manifest bounds (0 when nothing scored).

    Args:
        info: The run header.
        rows: The run's evaluations (``RunStore.rows()``).
        variant: The resolved variant the run evaluated on (an ``envs.registry.Variant``).
        finished_at: End time; defaults to ``info.ended_at``, else now.
        program_paths: The run's stored programs, sha256 -> path relative to the run directory
            (``RunStore.program_paths()``), for ``best_program_path``; None leaves it unset.

    Returns:
        The row.

    Raises:
        ValueError: If ``info`` names a different variant or content hash than ``variant``.
    """
    if info.env_id != variant.id or info.env_hash != variant.hash:
        raise ValueError(
            f"run {info.run_id} is on {info.env_id}@{info.env_hash}, not {variant.id}@{variant.hash}"
        )
    maximize = variant.direction is Direction.MAXIMIZE
    best_row = best_evaluation(rows, maximize=maximize)
    best = best_row.score if best_row is not None else None
    bounds = info.progress_bounds
    if bounds is not None:
        floor, target, key = bounds.y_floor, bounds.y_target, bounds.key
    else:  # a run made before bounds were recorded: the manifest's, key unknown
        floor, target, key = variant.progress.y_floor, variant.progress.y_target, None
    progress = normalized_progress(best, floor, target)
    return LeaderboardRow(
        run_id=info.run_id,
        family=info.family,
        variant=variant.id,
        env_version=info.env_version,
        env_hash=info.env_hash,
        agent=info.agent,
        agent_version=info.agent_version,
        agent_config_json=json.dumps(info.agent_config, sort_keys=True),
        models_json=json.dumps(info.models, sort_keys=True),
        budget_json=json.dumps(info.budget, sort_keys=True),
        label=info.label,
        seed=info.seed,
        best_score=best,
        n_evaluations=len(rows),
        n_ok=sum(r.status is Status.OK for r in rows),
        n_infra_error=sum(r.status is Status.INFRA_ERROR for r in rows),
        progress=progress,
        direction=variant.direction,
        finished_at=finished_at or info.ended_at or utc_now_iso(),
        git_commit=info.git_commit,
        package_versions_json=json.dumps(info.package_versions, sort_keys=True),
        cost_usd=math.fsum(r.cost_usd for r in rows),
        adapter_version=_int_or_none(info.agent_summary.get("adapter_version")),
        agent_summary_json=json.dumps(info.agent_summary, sort_keys=True) if info.agent_summary else None,
        y_floor=floor,
        y_target=target,
        heldout_key=key,
        device=" + ".join(sorted({r.device for r in rows if r.device})) or None,
        **best_program(best_row, program_paths),
    )


def best_evaluation(rows: Sequence[CandidateRow], *, maximize: bool) -> CandidateRow | None:
    """The run's best full ``ok`` evaluation (the earliest among ties); None when nothing scored.

    Rows of derived ids (``<id>~subset-...``, ``<id>~quick``) spend budget, but their scores are
    not full scores and never the best.
    """
    scored = [
        r for r in rows if r.status is Status.OK and r.score is not None and not is_reduced_id(r.env_id)
    ]
    sign = -1.0 if maximize else 1.0
    return min(scored, key=lambda r: (sign * (r.score or 0.0), r.seq)) if scored else None


def best_program(best: CandidateRow | None, program_paths: Mapping[str, str] | None) -> dict[str, str | None]:
    """The leaderboard's ``best_program_sha`` / ``best_program_path`` of a best evaluation (None: none)."""
    sha = best.program_sha256 if best is not None else None
    return {"best_program_sha": sha, "best_program_path": (program_paths or {}).get(sha) if sha else None}


def _int_or_none(value: Any) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def summarize(df: pd.DataFrame, variant: str | None = None) -> pd.DataFrame:
    """Aggregate leaderboard rows per (variant, run identity, device).

    The identity (``<agent>@<cfg>``, :mod:`harness.compare.identity`) covers the agent, its
    configuration, its models per role and its budget, so runs of different configurations are
    never pooled; nor are runs timed on different devices (``device``: a GPU's name and SM
    count, "" where none was recorded), which get a row each. One run per (identity, device,
    seed) counts: the most recently finished (ties: the one appended last); the older ones are
    counted in ``older_duplicates``.

    Per group: ``runs`` (counted runs), ``scored`` (runs with a best score), ``seeds`` (distinct
    seeds), ``best`` (direction-aware best of ``best_score``), ``score_mean`` / ``score_sem`` over
    scored runs, ``progress_mean`` / ``progress_sem`` over all runs, total ``n_infra_error`` and
    ``cost_usd``. SEM is the sample standard deviation (ddof=1) over sqrt(n), NaN when n < 2.

    Failed runs (``best_score`` missing) count in ``runs`` and ``seeds`` and enter the progress
    statistics with progress 0, but are excluded from ``score_mean`` / ``score_sem`` (a failure
    has no score to average). Rows are not filtered by ``env_hash`` or ``env_version``; filter
    ``df`` first if runs from different variant contents must not be pooled.

    Args:
        df: Leaderboard rows (as from :func:`load_leaderboard`).
        variant: Keep only this variant id; None keeps all.

    Returns:
        One row per (variant, identity, device) with :data:`SUMMARY_COLUMNS`, sorted by variant,
        then by mean progress (descending), then identity and device.

    Raises:
        KeyError: If ``df`` lacks a leaderboard column.
        ValueError: If one variant's rows disagree on the score direction.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in df]
    if missing:
        raise KeyError(f"leaderboard frame lacks columns {missing}")
    if variant is not None:
        df = df[df["variant"] == variant]
    records = cast("list[dict[str, Any]]", df.to_dict("records"))
    return pd.DataFrame(summarize_records(records), columns=list(SUMMARY_COLUMNS))
