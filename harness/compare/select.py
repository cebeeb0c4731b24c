"""Choose the runs a comparison uses and compute each run's metrics (final or at a budget)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .anytime import (
    Axis,
    CandidatesMissingError,
    at_budget,
    best_so_far,
    progress_auc,
    progress_of,
    read_candidates,
)

RUN_COLUMNS = ("run_id", "agent", "seed", "score", "u", "auc")
"""Columns of :attr:`VariantRuns.runs`."""


class VersionMixError(ValueError):
    """The selected runs of a variant were scored on different contents (content hashes)."""


@dataclass(frozen=True)
class Budget:
    """Where on the anytime curve runs are compared; all None means at the end of each run."""

    evaluations: int | None = None
    """Compare after this many evaluations."""
    cost_usd: float | None = None
    """Compare after this much LLM spend."""
    wall_s: float | None = None
    """Compare after this many seconds of wall time."""

    def axis(self) -> tuple[Axis, float] | None:
        """The one budget axis set, or None.

        Raises:
            ValueError: If more than one is set or a budget is negative.
        """
        set_ = [
            (a, v)
            for a, v in (
                ("evaluations", self.evaluations),
                ("cost_usd", self.cost_usd),
                ("wall_s", self.wall_s),
            )
            if v is not None
        ]
        if len(set_) > 1:
            raise ValueError("give at most one of --at-evaluations, --at-cost, --at-wall-s")
        if set_ and not float(set_[0][1]) >= 0:
            raise ValueError(f"budget must be >= 0, got {set_[0][1]}")
        return (set_[0][0], float(set_[0][1])) if set_ else None  # type: ignore[return-value]

    def label(self) -> str:
        """Human-readable description."""
        ax = self.axis()
        if ax is None:
            return "final"
        unit = {"evaluations": "evaluations", "cost_usd": "USD", "wall_s": "s wall"}[ax[0]]
        return f"at {ax[1]:g} {unit}"


@dataclass
class VariantRuns:
    """The runs of one variant entering a comparison, one per (agent, seed)."""

    variant: str
    """Variant id."""
    env_hash: str
    """Content hash the runs were scored on."""
    maximize: bool
    """Score direction."""
    runs: pd.DataFrame
    """One row per run with :data:`RUN_COLUMNS` (``auc`` NaN when curves are unavailable)."""
    notes: list[str] = field(default_factory=list)
    """Things the reader must know (duplicates replaced, stale contents, missing curves)."""


def select_runs(
    lb: pd.DataFrame, variant: str, current_hash: str, agents: tuple[str, ...], *, all_versions: bool
) -> tuple[pd.DataFrame, list[str]]:
    """The leaderboard rows of ``variant`` for ``agents``, one per (agent, seed).

    Runs scored on different contents are refused unless ``all_versions``. When one
    (agent, seed) has several runs the most recently finished one is kept, and a note says so.

    Args:
        lb: Leaderboard rows (``load_leaderboard``).
        variant: Variant id.
        current_hash: The variant's content hash in this checkout.
        agents: Agents to keep.
        all_versions: Allow mixing content hashes.

    Returns:
        The rows and the notes.

    Raises:
        VersionMixError: If the rows span several content hashes and ``all_versions`` is off.
    """
    notes: list[str] = []
    df = lb[(lb["variant"] == variant) & lb["agent"].isin(agents)]
    hashes = df["env_hash"].value_counts()
    if len(hashes) > 1 and not all_versions:
        detail = ", ".join(f"{h} ({n} runs)" for h, n in hashes.items())
        raise VersionMixError(
            f"{variant}: runs were scored on different contents: {detail}; "
            "pass --all-versions to pool them anyway"
        )
    if len(hashes) > 1:
        notes.append(f"{variant}: pooling runs from {len(hashes)} content hashes (--all-versions)")
    elif len(hashes) == 1 and hashes.index[0] != current_hash:
        notes.append(f"{variant}: runs were scored on {hashes.index[0]}; this checkout has {current_hash}")
    df = df.sort_values("finished_at", kind="stable")
    dup = df.duplicated(["agent", "seed"], keep="last")
    for (a, s), g in df[dup].groupby(["agent", "seed"]):
        notes.append(f"{variant}: {a} seed {s}: {len(g)} older run(s) ignored, latest kept")
    return df[~dup].reset_index(drop=True), notes


def variant_runs(
    lb: pd.DataFrame,
    *,
    variant: str,
    current_hash: str,
    maximize: bool,
    y_init: float,
    y_target: float,
    agents: tuple[str, ...],
    results_dir: Path,
    budget: Budget = Budget(),
    all_versions: bool = False,
) -> VariantRuns:
    """Select a variant's runs and compute score, progress u and progress AUC per run.

    Final values come from the leaderboard; at a budget (and for the AUC) they come from each
    run's ``results_dir/<run_id>/candidates.parquet``.

    Args:
        lb: Leaderboard rows.
        variant: Variant id.
        current_hash: The variant's content hash in this checkout.
        maximize: Score direction.
        y_init: Progress bound of the initial program.
        y_target: Progress bound regarded as solved.
        agents: Agents to compare.
        results_dir: Directory holding the run directories.
        budget: Where to compare.
        all_versions: Allow mixing content hashes.

    Returns:
        The runs with their metrics.

    Raises:
        VersionMixError: See :func:`select_runs`.
        CandidatesMissingError: If a budget is set and a run's candidates are missing.
        ValueError: If the budget is invalid.
    """
    rows, notes = select_runs(lb, variant, current_hash, agents, all_versions=all_versions)
    axis = budget.axis()
    out = pd.DataFrame(
        {
            "run_id": rows["run_id"].astype(str),
            "agent": rows["agent"].astype(str),
            "seed": rows["seed"].astype(np.int64),
            "score": pd.to_numeric(rows["best_score"], errors="coerce").astype(np.float64),
            "u": pd.to_numeric(rows["progress"], errors="coerce").fillna(0.0).astype(np.float64),
            "auc": math.nan,
        }
    )
    paths = {rid: Path(results_dir) / rid / "candidates.parquet" for rid in out["run_id"]}
    absent = [rid for rid, p in paths.items() if not p.is_file()]
    if absent and axis is not None:
        raise CandidatesMissingError(
            f"{variant}: comparing {budget.label()} needs candidates.parquet of every run; "
            f"missing in {results_dir} for {', '.join(absent)}"
        )
    if absent:
        notes.append(f"{variant}: no candidates in {results_dir} for {len(absent)} run(s); AUC not shown")
        return VariantRuns(variant, _hash_of(rows, current_hash), maximize, out, notes)
    if out.empty:
        return VariantRuns(variant, current_hash, maximize, out, notes)
    curves = best_so_far(
        read_candidates(paths, with_times=axis is not None and axis[0] == "wall_s"), maximize=maximize
    )
    if axis is not None:
        best = at_budget(curves, axis[0], axis[1]).reindex(out["run_id"]).to_numpy()
        out["score"] = best
        out["u"] = progress_of(best, y_init, y_target)
    horizon = int(budget.evaluations) if budget.evaluations else int(curves["evaluations"].max())
    out["auc"] = progress_auc(curves, y_init, y_target, max(horizon, 1)).reindex(out["run_id"]).to_numpy()
    return VariantRuns(variant, _hash_of(rows, current_hash), maximize, out, notes)


def _hash_of(rows: pd.DataFrame, default: str) -> str:
    hashes = sorted(set(rows["env_hash"].astype(str)))
    return "+".join(hashes) if hashes else default


def agent_curves(
    lb: pd.DataFrame,
    *,
    variant: str,
    current_hash: str,
    maximize: bool,
    agents: tuple[str, ...] | None,
    results_dir: Path,
    with_times: bool = False,
    all_versions: bool = False,
) -> tuple[dict[str, pd.DataFrame], list[str]]:
    """Best-so-far curves of a variant's runs, grouped by agent (one run per agent and seed).

    Args:
        lb: Leaderboard rows.
        variant: Variant id.
        current_hash: The variant's content hash in this checkout.
        maximize: Score direction.
        agents: Agents to keep (None: every agent with runs).
        results_dir: Directory holding the run directories.
        with_times: Also compute the wall-time axis.
        all_versions: Allow mixing content hashes.

    Returns:
        Agent -> curves, and notes (runs skipped because their candidates are missing).

    Raises:
        VersionMixError: See :func:`select_runs`.
    """
    wanted = (
        agents
        if agents is not None
        else tuple(sorted(set(lb.loc[lb["variant"] == variant, "agent"].astype(str))))
    )
    rows, notes = select_runs(lb, variant, current_hash, wanted, all_versions=all_versions)
    paths = {str(r): Path(results_dir) / str(r) / "candidates.parquet" for r in rows["run_id"]}
    absent = [rid for rid, p in paths.items() if not p.is_file()]
    if absent:
        notes.append(f"{variant}: no candidates in {results_dir} for {', '.join(absent)}; not plotted")
    paths = {k: v for k, v in paths.items() if k not in absent}
    if not paths:
        return {}, notes
    curves = best_so_far(read_candidates(paths, with_times=with_times), maximize=maximize)
    agent_of = dict(zip(rows["run_id"].astype(str), rows["agent"].astype(str), strict=True))
    cats = curves["run_id"].cat
    by_agent = np.asarray([agent_of[str(c)] for c in cats.categories], dtype=object)[cats.codes.to_numpy()]
    return {str(a): g.reset_index(drop=True) for a, g in curves.groupby(by_agent, sort=True)}, notes
