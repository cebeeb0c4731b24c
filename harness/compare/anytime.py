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
import pyarrow.dataset as ds

from harness.envs.subset import DERIVED_MARK

Axis = Literal["evaluations", "wall_s", "cost_usd"]
"""Budget axes of an anytime curve."""
AXES: tuple[Axis, ...] = ("evaluations", "wall_s", "cost_usd")

_READ = ["run_id", "seq", "status", "score", "cost_usd", "env_id"]
_TIMES = ["started_at", "finished_at"]
_TYPES = {
    "seq": pa.int64(),
    "status": pa.string(),
    "score": pa.float64(),
    "cost_usd": pa.float64(),
    "env_id": pa.string(),
    "started_at": pa.timestamp("us", tz="UTC"),
    "finished_at": pa.timestamp("us", tz="UTC"),
}


class CandidatesMissingError(FileNotFoundError):
    """A run has no ``candidates.parquet`` snapshot to draw its curve from."""


def parquet_problem(path: Path, *, full: bool = False) -> str | None:
    """Why a Parquet file cannot be read, in one line (None: it reads, or it does not exist).

    Args:
        path: The file.
        full: Read every row (otherwise only the footer: magic bytes, metadata, schema).
    """
    import pyarrow.parquet as pq

    if not path.exists():
        return None
    try:
        pq.read_table(path) if full else pq.read_metadata(path)
    except (pa.ArrowException, OSError) as e:
        why = (str(e).splitlines() or [type(e).__name__])[0]
        if why.startswith("Could not open Parquet input source") and "': " in why:
            why = why.split("': ", 1)[1]  # the path is named by the caller
        return why.split(". ")[0]  # Arrow's first sentence says what is wrong
    return None


def read_candidates(paths: Mapping[str, Path], *, with_times: bool = False) -> pa.Table:
    """Read several runs' candidate tables in one multi-threaded scan (only the columns curves need).

    Args:
        paths: Run id -> that run's ``candidates.parquet``.
        with_times: Also read the start / finish times, as UTC timestamps (for the wall-time axis).

    Returns:
        One table whose ``run_id`` is a dictionary column holding the mapping's keys, so rows are
        attributed to the run directory they were read from.

    Raises:
        CandidatesMissingError: If a file does not exist.
        pyarrow.ArrowInvalid: If a file is unreadable or a time is not ISO-8601.
    """
    missing = [f"{rid} ({p})" for rid, p in paths.items() if not Path(p).is_file()]
    if missing:
        raise CandidatesMissingError(f"no candidates.parquet for run(s): {', '.join(missing)}")
    cols = _READ[1:] + (_TIMES if with_times else [])
    if not paths:
        return pa.table({"run_id": pa.array([], pa.dictionary(pa.int32(), pa.string()))})
    by_file = {str(Path(p)): rid for rid, p in paths.items()}
    if len(by_file) != len(paths):
        raise ValueError("two runs map to the same candidates file")
    # An explicit schema reads both results schemas: version 1 wrote times as ISO-8601 strings,
    # which the scan casts (Arrow parses offsets natively); version 2 writes UTC timestamps.
    schema = pa.schema([(c, _TYPES[c]) for c in cols])
    table = ds.dataset(list(by_file), format="parquet", schema=schema).to_table(columns=[*cols, "__filename"])
    enc = pc.dictionary_encode(table["__filename"]).combine_chunks()
    run_ids = pa.DictionaryArray.from_arrays(
        enc.indices, pa.array([by_file[str(Path(f))] for f in enc.dictionary.to_pylist()])
    )
    table = table.drop_columns(["__filename"]).append_column("run_id", run_ids)
    return table


def best_so_far(table: pa.Table, *, maximize: bool) -> pd.DataFrame:
    """Per-run best-so-far curves.

    Args:
        table: Candidate rows of one or more runs (:func:`read_candidates`).
        maximize: Score direction.

    Returns:
        One row per evaluation, sorted by run and ``seq``, with ``run_id`` (categorical),
        ``evaluations`` (1-based count), ``cost_usd`` (cumulative), ``wall_s`` (seconds from the
        run's first submission to the latest finish so far; only with times) and ``best`` (best
        ``ok`` score so far, NaN before the first). Validation-subset rows (env id
        ``<id>~subset-...``) count as evaluations but never as scores.
    """
    if table.num_rows == 0:
        return pd.DataFrame({"run_id": pd.Categorical([]), "evaluations": [], "cost_usd": [], "best": []})
    run = table["run_id"].combine_chunks()
    if not pa.types.is_dictionary(run.type):
        run = pc.dictionary_encode(run)
    codes = run.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    seq = table["seq"].to_numpy()
    order = np.lexsort((seq, codes))
    presorted = bool(np.all(order[1:] > order[:-1]))  # already grouped and in seq order (the usual case)

    def col(arr: np.ndarray) -> np.ndarray:
        return arr if presorted else arr[order]

    ok = pc.fill_null(pc.equal(table["status"], "ok"), False).to_numpy(zero_copy_only=False)
    if "env_id" in table.column_names:  # a subset or ~quick score is not comparable with full scores
        subset = pc.fill_null(pc.match_substring(table["env_id"], DERIVED_MARK), False)
        ok = ok & ~subset.to_numpy(zero_copy_only=False)
    score = np.where(ok, pc.fill_null(table["score"], np.nan).to_numpy(zero_copy_only=False), np.nan)
    codes, score = col(codes), col(score).astype(np.float64)
    cost = col(pc.fill_null(table["cost_usd"], 0.0).to_numpy(zero_copy_only=False).astype(np.float64))
    key = pd.Series(codes)
    signed = pd.Series(np.where(np.isnan(score), -np.inf, score if maximize else -score))
    running = signed.groupby(key, sort=False).cummax().to_numpy()
    best = np.where(np.isfinite(running), running if maximize else -running, np.nan)
    out = pd.DataFrame(
        {
            "run_id": pd.Categorical.from_codes(codes, categories=run.dictionary.to_pylist()),
            "evaluations": key.groupby(key, sort=False).cumcount().to_numpy() + 1,
            "cost_usd": pd.Series(cost).groupby(key, sort=False).cumsum().to_numpy(),
            "best": best,
        }
    )
    if "finished_at" in table.column_names:
        t0 = col(pc.cast(table["started_at"], pa.int64()).to_numpy(zero_copy_only=False))
        t1 = col(pc.cast(table["finished_at"], pa.int64()).to_numpy(zero_copy_only=False))
        start = pd.Series(t0).groupby(key, sort=False).transform("min").to_numpy()
        # Parallel workers finish out of order: the wall time of a best-so-far is the latest finish.
        end = pd.Series(t1).groupby(key, sort=False).cummax().to_numpy()
        out["wall_s"] = (end - start) / 1e6
    return out


def _runs(curves: pd.DataFrame) -> list[str]:
    """Run ids of a curves frame, in order of first appearance."""
    return [str(r) for r in curves["run_id"].drop_duplicates()]


def progress_of(best: pd.Series | np.ndarray, y_floor: float, y_target: float) -> np.ndarray:
    """Vectorised normalised progress u in [0, 1]; NaN (nothing scored) maps to 0.

    Raises:
        ValueError: If ``y_floor == y_target``.
    """
    if y_floor == y_target:
        raise ValueError("y_floor and y_target must differ")
    u = (np.asarray(best, dtype=np.float64) - y_floor) / (y_target - y_floor)
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
    within = curves[curves[axis] <= budget]
    last = within.groupby("run_id", sort=False, observed=True)["best"].last()
    last.index = last.index.astype(str)
    return last.reindex(_runs(curves))


def reach(curves: pd.DataFrame, axis: Axis) -> pd.Series:
    """How far each run got on ``axis`` (its last evaluation count, wall time or cumulative cost).

    Raises:
        KeyError: If ``axis`` is ``wall_s`` and the curves carry no times.
    """
    last = curves.groupby("run_id", sort=False, observed=True)[axis].max()
    last.index = last.index.astype(str)
    return last.reindex(_runs(curves))


def progress_auc(
    curves: pd.DataFrame, y_floor: float, y_target: float, horizon: int | Mapping[str, int]
) -> pd.Series:
    """Normalised area under each run's progress curve over the first ``horizon`` evaluations.

    ``AUC = (1 / horizon) * sum_{k=1..horizon} u(best after k evaluations)``, in [0, 1]; a run
    that stopped before ``horizon`` keeps its final progress for the remaining evaluations.

    Args:
        curves: Output of :func:`best_so_far`.
        y_floor: Score at u = 0 (the run's draw's floor, :attr:`Progress.y_floor`).
        y_target: Progress bound regarded as solved.
        horizon: Number of evaluations the area covers, one for all runs or per run id (a run
            absent from the mapping uses its own length).

    Returns:
        Run id -> AUC.

    Raises:
        ValueError: If a horizon is < 1.
    """
    runs = _runs(curves)
    if isinstance(horizon, Mapping):
        own = reach(curves, "evaluations")
        h = pd.Series({r: int(horizon.get(r, own[r])) for r in runs}, dtype=np.int64)
    else:
        h = pd.Series(int(horizon), index=runs, dtype=np.int64)
    if (h < 1).any():
        raise ValueError("horizon must be >= 1")
    per_row = h.reindex(curves["run_id"].astype(str)).to_numpy()
    within = curves[curves["evaluations"].to_numpy() <= per_row]
    u = pd.Series(progress_of(within["best"], y_floor, y_target), index=within.index)
    g = u.groupby(within["run_id"], sort=False, observed=True)
    total, n, last = g.sum(), g.size(), g.last()
    for s in (total, n, last):
        s.index = s.index.astype(str)
    auc = (total + (h.reindex(total.index) - n) * last) / h.reindex(total.index)
    return auc.reindex(runs).fillna(0.0)


def progress_auc_on(
    curves: pd.DataFrame, axis: Axis, budget: float, y_floor: float, y_target: float
) -> pd.Series:
    """Time- (or cost-) averaged progress over ``[0, budget]`` of ``axis``: ``(1/B) * integral u(x) dx``.

    Each run's u is a step function that is 0 from the run's start until its first point and
    then holds each point's value until the next; points past ``budget`` do not count.

    Args:
        curves: Output of :func:`best_so_far`.
        axis: ``wall_s`` or ``cost_usd`` (``evaluations`` is :func:`progress_auc`).
        budget: Positive end of the interval.
        y_floor: Score at u = 0 (the run's draw's floor, :attr:`Progress.y_floor`).
        y_target: Progress bound regarded as solved.

    Returns:
        Run id -> AUC in [0, 1].

    Raises:
        ValueError: If ``budget`` is not positive.
    """
    if not budget > 0:
        raise ValueError(f"an area needs a positive budget, got {budget}")
    x = np.clip(curves[axis].to_numpy(dtype=np.float64), 0.0, budget)
    u = progress_of(curves["best"], y_floor, y_target)
    key = curves["run_id"].astype(str).to_numpy()
    nxt = pd.Series(x).groupby(key, sort=False).shift(-1).fillna(budget).to_numpy()
    area = pd.Series(u * (nxt - x)).groupby(key, sort=False).sum() / budget
    return area.reindex(_runs(curves)).fillna(0.0)


def on_grid(
    curves: pd.DataFrame, axis: Axis, grid: np.ndarray, value: str = "best"
) -> tuple[list[str], np.ndarray]:
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
    for rid, g in curves.groupby("run_id", sort=True, observed=True):  # one iteration per run, not per row
        x = g[axis].to_numpy(dtype=np.float64)
        y = g[value].to_numpy(dtype=np.float64)
        idx = np.searchsorted(x, grid, side="right") - 1
        rows.append(np.where(idx >= 0, y[np.clip(idx, 0, None)], np.nan))
        runs.append(str(rid))
    return runs, np.vstack(rows) if rows else np.empty((0, grid.size))
