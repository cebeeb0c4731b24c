"""Anytime performance: best-so-far score of each run as a function of evaluations, wall time and cost.

Built from the runs' ``candidates.parquet`` snapshots with pyarrow and grouped pandas kernels
(cumulative max/sum per run); no Python loop touches a candidate row, so a million rows take
well under a second.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

Axis = Literal["evaluations", "wall_s", "cost_usd"]
"""Budget axes of an anytime curve."""
AXES: tuple[Axis, ...] = ("evaluations", "wall_s", "cost_usd")

_READ = ["run_id", "seq", "status", "score", "cost_usd"]
_TIMES = ["started_at", "finished_at"]


class CandidatesMissingError(FileNotFoundError):
    """A run has no ``candidates.parquet`` snapshot to draw its curve from."""


def read_candidates(paths: Mapping[str, Path], *, with_times: bool = False) -> pa.Table:
    """Read several runs' candidate tables at once (only the columns curves need).

    Args:
        paths: Run id -> that run's ``candidates.parquet``.
        with_times: Also read the ISO start / finish times (for the wall-time axis).

    Returns:
        One table; ``run_id`` is overwritten with the mapping's key so rows are attributed to
        the run directory they were read from.

    Raises:
        CandidatesMissingError: If a file does not exist.
    """
    missing = [f"{rid} ({p})" for rid, p in paths.items() if not Path(p).is_file()]
    if missing:
        raise CandidatesMissingError(f"no candidates.parquet for run(s): {', '.join(missing)}")
    cols = _READ + (_TIMES if with_times else [])
    if not paths:
        return pa.table({c: pa.array([], pa.string() if c in ("run_id", "status") else pa.float64()) for c in cols})
    parts = []
    for rid, path in paths.items():  # one read per run file; the rows stay in Arrow
        t = pq.read_table(path, columns=cols)
        ids = pa.repeat(pa.scalar(rid, pa.string()), t.num_rows)
        parts.append(t.set_column(t.schema.get_field_index("run_id"), "run_id", ids))
    return pa.concat_tables(parts, promote_options="permissive")


def best_so_far(table: pa.Table, *, maximize: bool) -> pd.DataFrame:
    """Per-run best-so-far curves.

    Args:
        table: Candidate rows of one or more runs (``run_id``, ``seq``, ``status``, ``score``,
            ``cost_usd``; optionally ``started_at`` / ``finished_at``).
        maximize: Score direction.

    Returns:
        One row per evaluation, sorted by run and ``seq``, with ``run_id``, ``evaluations``
        (1-based count), ``cost_usd`` (cumulative), ``wall_s`` (seconds since the run's first
        submission; only with times) and ``best`` (best ``ok`` score so far, NaN before the first).
    """
    ok = pc.equal(table["status"], "ok")
    score = pc.if_else(ok, table["score"], pa.scalar(None, pa.float64()))
    frame = pd.DataFrame(
        {
            "run_id": table["run_id"].to_numpy(zero_copy_only=False),
            "seq": table["seq"].to_numpy(zero_copy_only=False),
            "score": score.to_numpy(zero_copy_only=False).astype(np.float64),
            "cost": pc.fill_null(table["cost_usd"], 0.0).to_numpy(zero_copy_only=False).astype(np.float64),
        }
    )
    if "finished_at" in table.column_names:
        frame["t0"] = pd.to_datetime(table["started_at"].to_pandas(), utc=True, format="ISO8601")
        frame["t1"] = pd.to_datetime(table["finished_at"].to_pandas(), utc=True, format="ISO8601")
    frame = frame.sort_values(["run_id", "seq"], kind="stable", ignore_index=True)
    g = frame.groupby("run_id", sort=False)
    signed = frame["score"] if maximize else -frame["score"]
    running = signed.fillna(-np.inf).groupby(frame["run_id"], sort=False).cummax()
    best = running.where(np.isfinite(running))
    out = pd.DataFrame(
        {
            "run_id": frame["run_id"],
            "evaluations": g.cumcount().to_numpy() + 1,
            "cost_usd": g["cost"].cumsum().to_numpy(),
            "best": (best if maximize else -best).to_numpy(),
        }
    )
    if "t0" in frame:
        start = g["t0"].transform("min")
        out["wall_s"] = (frame["t1"] - start).dt.total_seconds().to_numpy()
        # Parallel workers finish out of order: wall time of the best-so-far is its running max.
        out["wall_s"] = out["wall_s"].groupby(out["run_id"], sort=False).cummax()
    return out


def progress_of(best: pd.Series | np.ndarray, y_init: float, y_target: float) -> np.ndarray:
    """Vectorised normalised progress u in [0, 1]; NaN (nothing scored) maps to 0.

    Raises:
        ValueError: If ``y_init == y_target``.
    """
    if y_init == y_target:
        raise ValueError("y_init and y_target must differ")
    u = (np.asarray(best, dtype=np.float64) - y_init) / (y_target - y_init)
    return np.nan_to_num(np.clip(u, 0.0, 1.0), nan=0.0)


def at_budget(curves: pd.DataFrame, axis: Axis, budget: float) -> pd.Series:
    """Each run's best-so-far once ``budget`` units of ``axis`` were spent.

    Args:
        curves: Output of :func:`best_so_far`.
        axis: Budget axis.
        budget: Budget (a run that stopped earlier keeps its final best).

    Returns:
        Run id -> best score (NaN when nothing had scored within the budget).

    Raises:
        KeyError: If ``axis`` is ``wall_s`` and the curves carry no times.
        ValueError: If ``budget`` is negative or NaN.
    """
    if not budget >= 0:
        raise ValueError(f"budget must be >= 0, got {budget}")
    runs = pd.unique(curves["run_id"])
    within = curves[curves[axis] <= budget]
    last = within.groupby("run_id", sort=False)["best"].last()
    return last.reindex(runs)


def progress_auc(curves: pd.DataFrame, y_init: float, y_target: float, horizon: int) -> pd.Series:
    """Normalised area under each run's progress curve over the first ``horizon`` evaluations.

    ``AUC = (1 / horizon) * sum_{k=1..horizon} u(best after k evaluations)``, in [0, 1]; a run
    that stopped before ``horizon`` keeps its final progress for the remaining evaluations.

    Args:
        curves: Output of :func:`best_so_far`.
        y_init: Progress bound of the initial program.
        y_target: Progress bound regarded as solved.
        horizon: Number of evaluations the area covers.

    Returns:
        Run id -> AUC.

    Raises:
        ValueError: If ``horizon`` < 1.
    """
    if horizon < 1:
        raise ValueError("horizon must be >= 1")
    runs = pd.unique(curves["run_id"])
    within = curves[curves["evaluations"] <= horizon]
    u = pd.Series(progress_of(within["best"], y_init, y_target), index=within.index)
    g = u.groupby(within["run_id"], sort=False)
    total, n, last = g.sum(), g.size(), g.last()
    return ((total + (horizon - n) * last) / horizon).reindex(runs).fillna(0.0)


def on_grid(curves: pd.DataFrame, axis: Axis, grid: np.ndarray, value: str = "best") -> tuple[list[str], np.ndarray]:
    """Sample every run's step curve at the points of ``grid`` (value of the last point <= x).

    Args:
        curves: Output of :func:`best_so_far` (possibly with an added value column).
        axis: x axis.
        grid: Increasing x values.
        value: Column to sample.

    Returns:
        Run ids and a (runs, len(grid)) array; NaN before a run's first point.
    """
    runs: list[str] = []
    rows: list[np.ndarray] = []
    for rid, g in curves.groupby("run_id", sort=True):  # one iteration per run, not per row
        x = g[axis].to_numpy(dtype=np.float64)
        y = g[value].to_numpy(dtype=np.float64)
        idx = np.searchsorted(x, grid, side="right") - 1
        rows.append(np.where(idx >= 0, y[np.clip(idx, 0, None)], np.nan))
        runs.append(str(rid))
    return runs, np.vstack(rows) if rows else np.empty((0, grid.size))
