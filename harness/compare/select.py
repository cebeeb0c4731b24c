"""Choose the runs a comparison uses and compute each run's metrics (final or at a budget)."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.envs.manifest import Progress

from .anytime import (
    Axis,
    CandidatesMissingError,
    at_budget,
    best_so_far,
    parquet_problem,
    progress_auc,
    progress_auc_on,
    progress_of,
    reach,
    read_candidates,
)
from .cfg import UNRECORDED_KEY as UNRECORDED_KEY
from .cfg import heldout_key_of
from .identity import DEVICE_COLUMN, IDENTITY_COLUMN, devices, frame_records, with_identity
from .labels import record_labels

RUN_COLUMNS = ("run_id", "agent", "seed", "score", "u", "auc")
"""Columns of :attr:`VariantRuns.runs`."""


class VersionMixError(ValueError):
    """The selected runs of a variant were scored on different contents (content hashes)."""


class KeyMixError(VersionMixError):
    """The selected runs of a variant were scored on different held-out keys' draws.

    They are never pooled: their scores and progress bounds are not on one scale.
    """


def key_labels(df: pd.DataFrame) -> pd.Series:
    """Each row's held-out key: a fingerprint, ``public``, ``none`` (no held-out draw) or ``unrecorded``."""
    if "heldout_key" not in df:
        return pd.Series(UNRECORDED_KEY, index=df.index, dtype=object)
    return df["heldout_key"].map(lambda k: heldout_key_of({"heldout_key": k}))


def _check_keys(variant: str, labels: pd.Series) -> None:
    counts = labels.value_counts()
    distinct = set(counts.index)
    if "none" in distinct:  # the variant draws nothing from a key: older rows are on the same data
        distinct.discard(UNRECORDED_KEY)
    if len(distinct) > 1:
        detail = ", ".join(f"{k} ({n} runs)" for k, n in counts.items())
        pick = next(k for k in counts.index if k not in ("none", UNRECORDED_KEY))
        raise KeyMixError(
            f"{variant}: runs were scored on different held-out keys' draws: {detail}; scores and u of "
            f"different keys are not comparable: compare one key's runs (e.g. --key {pick})"
        )


def rows_bounds(variant: str, rows: pd.DataFrame, progress: Progress) -> tuple[float, float]:
    """``(y_floor, y_target)`` the rows were measured against (the manifest's for older rows).

    Raises:
        KeyMixError: If the rows recorded different bounds.
    """
    default = (progress.y_floor, progress.y_target)
    pairs: set[tuple[float, float]] = set()
    empty = pd.Series(math.nan, index=rows.index, dtype=float)
    floors = pd.to_numeric(rows.get("y_floor", empty), errors="coerce")
    targets = pd.to_numeric(rows.get("y_target", empty), errors="coerce")
    for f, t in zip(floors, targets, strict=True):
        pairs.add((float(f), float(t)) if math.isfinite(f) and math.isfinite(t) else default)
    if len(pairs) > 1:
        raise KeyMixError(f"{variant}: the runs were measured against different bounds {sorted(pairs)}")
    return pairs.pop() if pairs else default


def degenerate_note(variant: str, u: pd.Series) -> str | None:
    """A note when every run has u = 0 or every run u = 1 (u, its AUC and IQM then say nothing)."""
    if len(u) < 2:
        return None
    if bool((u <= 0.0).all()):
        return (f"{variant}: u is 0 for every run (no run got above the progress floor): u, its AUC "
                "and IQM cannot tell these agents apart; compare best scores")  # fmt: skip
    if bool((u >= 1.0).all()):
        return (f"{variant}: u is 1 for every run (every run reached the target): u, its AUC and IQM "
                "cannot tell these agents apart; compare best scores")  # fmt: skip
    return None


class DeviceMixError(ValueError):
    """The selected runs of a variant were timed on different devices (GPU models, MIG slices)."""


class BudgetPastEndError(ValueError):
    """A comparison budget lies past the end of some runs (their values there would be invented)."""


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
    """The runs of one variant entering a comparison, one per (unit, seed)."""

    variant: str
    """Variant id."""
    env_hash: str
    """Content hash the runs were scored on."""
    maximize: bool
    """Score direction."""
    runs: pd.DataFrame
    """One row per run with :data:`RUN_COLUMNS` (``agent`` holds the unit label; ``auc`` NaN when
    the run's curve is unavailable)."""
    notes: list[str] = field(default_factory=list)
    """Things the reader must know (duplicates replaced, stale contents, missing curves)."""


Units = Mapping[str, tuple[str, ...]]
"""Unit label -> the run identities (``<agent>@<cfg>``) it holds (:class:`~.identity.Selection`)."""


def identity_units(rows: pd.DataFrame) -> dict[str, tuple[str, ...]]:
    """Every identity in ``rows`` as its own unit, named by what differs (:mod:`.labels`), in label order."""
    if IDENTITY_COLUMN not in rows:
        rows = with_identity(rows)
    labels = record_labels(frame_records(rows))
    return {label: (ident,) for ident, label in sorted(labels.items(), key=lambda kv: kv[1])}


def _unit_map(units: Units) -> dict[str, str]:
    return {ident: label for label, idents in units.items() for ident in idents}


def _one_device(df: pd.DataFrame, variant: str, device: str | None) -> pd.DataFrame:
    """The rows of one device: ``device``'s, or all when they share one.

    Raises:
        DeviceMixError: If the rows span several devices and ``device`` does not pick one.
    """
    seen = devices(df)
    if device is not None:
        return df[seen == device]
    counts = seen.value_counts()
    if len(counts) > 1:
        detail = ", ".join(f"{d or 'not recorded'!r} ({n} runs)" for d, n in counts.items())
        first = next((d for d in counts.index if d), "")
        raise DeviceMixError(
            f"{variant}: runs were timed on different devices: {detail}; their timings are not "
            f"comparable, so they are never pooled: compare one device at a time (--device {first!r})"
        )
    return df


def select_runs(
    lb: pd.DataFrame,
    variant: str,
    current_hash: str,
    units: Units,
    *,
    all_versions: bool,
    key: str | None = None,
    device: str | None = None,
) -> tuple[pd.DataFrame, list[str]]:
    """The leaderboard rows of ``variant`` for ``units``, one per (unit, seed), ``agent`` = unit label.

    Runs scored on different contents are refused unless ``all_versions``; runs timed on
    different devices (the ``device`` column, "" where unrecorded) are always refused unless
    ``device`` picks one. When one (unit, seed) has several runs the most recently finished one
    is kept, and a note says so.

    Args:
        lb: Leaderboard rows (``load_leaderboard``; the identity column is added when absent).
        variant: Variant id.
        current_hash: The variant's content hash in this checkout.
        units: Unit label -> identities.
        all_versions: Allow mixing content hashes.
        key: Keep only runs scored on this held-out key (fingerprint, ``public``, ``none``).
        device: Keep only the runs timed on this device (None: all, which must share one).

    Returns:
        The rows and the notes.

    Raises:
        VersionMixError: If the rows span several content hashes and ``all_versions`` is off.
        KeyMixError: If the rows were scored on several held-out keys' draws (never pooled).
        DeviceMixError: If the rows span several devices and ``device`` is None.
    """
    notes: list[str] = []
    if IDENTITY_COLUMN not in lb:
        lb = with_identity(lb)
    unit_of = _unit_map(units)
    df = lb[(lb["variant"] == variant) & lb[IDENTITY_COLUMN].isin(list(unit_of))].copy()
    df = _one_device(df, variant, device)
    df[DEVICE_COLUMN] = devices(df)
    if len(timed_on := sorted(set(df[DEVICE_COLUMN]) - {""})) == 1:
        notes.append(f"{variant}: runs timed on {timed_on[0]}")
    df["agent"] = df[IDENTITY_COLUMN].map(unit_of)
    if key is not None:
        df = df[key_labels(df) == key]
    _check_keys(variant, key_labels(df))
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
        notes.append(f"{variant}: {a} seed {s}: {len(g)} older run(s) ignored, the newest kept")
    return df[~dup].reset_index(drop=True), notes


def _budget_evaluations(text: Any) -> int | None:
    """``max_evaluations`` of a row's ``budget_json`` (None when unknown)."""
    try:
        value = json.loads(text).get("max_evaluations") if isinstance(text, str) else None
    except (ValueError, AttributeError):
        return None
    return int(value) if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _check_reach(variant: str, curves: pd.DataFrame, axis: Axis, budget: float, label: str) -> None:
    got = reach(curves, axis)
    short = got[~(got >= budget)]
    if not short.empty:
        unit = {"evaluations": " evaluations", "wall_s": " s", "cost_usd": " USD"}[axis]
        runs = ", ".join(f"{r} ({v:g}{unit})" for r, v in short.items())
        raise BudgetPastEndError(
            f"{variant}: {label} lies past the end of {len(short)} run(s): {runs}; "
            f"the largest budget every run reached is {float(got.min()):g}{unit}"
            + ("; these runs recorded no LLM cost" if axis == "cost_usd" and not got.max() > 0 else "")
        )


def variant_runs(
    lb: pd.DataFrame,
    *,
    variant: str,
    current_hash: str,
    maximize: bool,
    progress: Progress,
    units: Units,
    results_dir: Path,
    budget: Budget = Budget(),
    all_versions: bool = False,
    key: str | None = None,
    device: str | None = None,
) -> VariantRuns:
    """Select a variant's runs and compute score, progress u and progress AUC per run.

    Final values come from the leaderboard; at a budget (and for the AUC) they come from each
    run's ``results_dir/<run_id>/candidates.parquet``. Every figure of a run depends on that run
    alone: at the end the AUC spans the run's own evaluation budget (its length when the budget is
    unknown); at a budget, values and AUC span the budget, which every run must have reached.

    Args:
        lb: Leaderboard rows.
        variant: Variant id.
        current_hash: The variant's content hash in this checkout.
        maximize: Score direction.
        progress: The variant's manifest bounds (for rows that recorded none; u is computed
            against the bounds the rows recorded, their draw's).
        units: Unit label -> identities to compare.
        results_dir: Directory holding the run directories.
        budget: Where to compare.
        all_versions: Allow mixing content hashes.
        key: Keep only runs of this held-out key (:func:`select_runs`).
        device: Compare only the runs timed on this device (see :func:`select_runs`).

    Returns:
        The runs with their metrics.

    Raises:
        VersionMixError: See :func:`select_runs` (``KeyMixError`` too, and for mixed bounds).
        DeviceMixError: See :func:`select_runs`.
        CandidatesMissingError: If a budget is set and a run's candidates are missing or damaged
            (the message names ``bench repair``); without a budget such a run only loses its AUC.
        BudgetPastEndError: If a budget lies past the end of a run.
        ValueError: If the budget is invalid.
    """
    rows, notes = select_runs(
        lb, variant, current_hash, units, all_versions=all_versions, key=key, device=device
    )
    y_floor, y_target = rows_bounds(variant, rows, progress)
    axis = budget.axis()
    out = pd.DataFrame(
        {
            "run_id": rows["run_id"].astype(str),
            "agent": rows["agent"].astype(str),
            "seed": rows["seed"].astype(np.int64),
            "score": pd.to_numeric(rows["best_score"], errors="coerce").astype(np.float64),
            "u": 0.0,
            "auc": math.nan,
        }
    )
    out["u"] = progress_of(out["score"].to_numpy(), y_floor, y_target)  # older rows: today's rule
    env_hash = _hash_of(rows, current_hash)
    paths = {rid: Path(results_dir) / rid / "candidates.parquet" for rid in out["run_id"]}
    absent = [rid for rid, p in paths.items() if not p.is_file()]
    if absent and axis is not None:
        raise CandidatesMissingError(
            f"{variant}: comparing {budget.label()} needs candidates.parquet of every run; "
            f"missing in {results_dir} for {', '.join(absent)}"
        )
    if absent:  # only these runs lose their AUC; the others keep theirs
        notes.append(
            f"{variant}: no candidates in {results_dir} for {', '.join(absent)}: no AUC for these runs"
        )
    paths = {k: v for k, v in paths.items() if k not in absent}
    damaged, note = damaged_runs(variant, paths)
    if damaged and axis is not None:  # a budget's score comes from the candidates: none to use
        raise CandidatesMissingError(f"comparing {budget.label()} needs every run's candidates; {note}")
    if damaged:  # like a missing file: the leaderboard's final score stays, the AUC is skipped
        notes.append(f"{note}; no AUC until then")
    paths = {k: v for k, v in paths.items() if k not in damaged}
    if not paths:
        return VariantRuns(variant, env_hash, maximize, out, _with_degenerate(notes, variant, out))
    curves = best_so_far(
        read_candidates(paths, with_times=axis is not None and axis[0] == "wall_s"), maximize=maximize
    )
    if axis is not None:
        _check_reach(variant, curves, axis[0], axis[1], budget.label())
        best = at_budget(curves, axis[0], axis[1]).reindex(out["run_id"]).to_numpy()
        out["score"] = best
        out["u"] = progress_of(best, y_floor, y_target)
    if axis is None:
        horizons = {
            str(r): h
            for r, b in zip(
                rows["run_id"], rows.get("budget_json", pd.Series(None, index=rows.index)), strict=True
            )
            if (h := _budget_evaluations(b)) is not None
        }
        auc: pd.Series | None = progress_auc(curves, y_floor, y_target, horizons)
    elif axis[0] == "evaluations":
        auc = progress_auc(curves, y_floor, y_target, max(int(axis[1]), 1))
    else:
        auc = progress_auc_on(curves, axis[0], axis[1], y_floor, y_target) if axis[1] > 0 else None
    if auc is not None:
        out["auc"] = auc.reindex(out["run_id"]).to_numpy()
    return VariantRuns(variant, env_hash, maximize, out, _with_degenerate(notes, variant, out))


def damaged_runs(variant: str, paths: Mapping[str, Path]) -> tuple[dict[str, str], str]:
    """Runs whose ``candidates.parquet`` exists but cannot be read, and one note naming the repair.

    Returns:
        Run id -> what is wrong (its footer unreadable), and the note (``""`` when none is damaged).
    """
    damaged = {rid: why for rid, p in paths.items() if (why := parquet_problem(Path(p))) is not None}
    if not damaged:
        return {}, ""
    parts = [
        f"{rid} ({why}; rebuild it: bench repair {Path(paths[rid]).parent})" for rid, why in damaged.items()
    ]
    runs = "run" if len(parts) == 1 else "runs"
    return damaged, f"{variant}: candidates.parquet damaged in {runs} {', '.join(parts)}"


def _with_degenerate(notes: list[str], variant: str, out: pd.DataFrame) -> list[str]:
    note = degenerate_note(variant, out["u"])
    return [*notes, note] if note else notes


def _hash_of(rows: pd.DataFrame, default: str) -> str:
    hashes = sorted(set(rows["env_hash"].astype(str)))
    return "+".join(hashes) if hashes else default


def agent_curves(
    lb: pd.DataFrame,
    *,
    variant: str,
    current_hash: str,
    maximize: bool,
    units: Units | None,
    results_dir: Path,
    with_times: bool = False,
    all_versions: bool = False,
    progress: Progress | None = None,
    key: str | None = None,
    device: str | None = None,
) -> tuple[dict[str, pd.DataFrame], list[str], tuple[float, float] | None]:
    """Best-so-far curves of a variant's runs, grouped by unit (one run per unit and seed).

    Args:
        lb: Leaderboard rows.
        variant: Variant id.
        current_hash: The variant's content hash in this checkout.
        maximize: Score direction.
        units: Unit label -> identities (None: every identity with runs, each its own unit,
            named by :func:`identity_units`).
        results_dir: Directory holding the run directories.
        with_times: Also compute the wall-time axis.
        all_versions: Allow mixing content hashes.
        progress: The variant's manifest bounds; given, the runs' own ``(y_floor, y_target)`` is returned.
        key: Keep only runs of this held-out key (:func:`select_runs`).
        device: Plot only the runs timed on this device (see :func:`select_runs`).

    Returns:
        Unit label -> curves, notes (runs skipped because their candidates are missing or
        damaged, with the repair command), and the
        runs' progress bounds (None when ``progress`` is not given).

    Raises:
        VersionMixError: See :func:`select_runs`.
        DeviceMixError: See :func:`select_runs`.
    """
    lb = with_identity(lb) if IDENTITY_COLUMN not in lb else lb
    if units is None:
        units = identity_units(lb[lb["variant"] == variant])
    rows, notes = select_runs(
        lb, variant, current_hash, units, all_versions=all_versions, key=key, device=device
    )
    bounds = rows_bounds(variant, rows, progress) if progress is not None else None
    paths = {str(r): Path(results_dir) / str(r) / "candidates.parquet" for r in rows["run_id"]}
    absent = [rid for rid, p in paths.items() if not p.is_file()]
    if absent:
        notes.append(f"{variant}: no candidates in {results_dir} for {', '.join(absent)}; not plotted")
    paths = {k: v for k, v in paths.items() if k not in absent}
    damaged, note = damaged_runs(variant, paths)
    if damaged:
        notes.append(f"{note}; not plotted until then")
        paths = {k: v for k, v in paths.items() if k not in damaged}
    if not paths:
        return {}, notes, bounds
    curves = best_so_far(read_candidates(paths, with_times=with_times), maximize=maximize)
    agent_of = dict(zip(rows["run_id"].astype(str), rows["agent"].astype(str), strict=True))
    cats = curves["run_id"].cat
    by_agent = np.asarray([agent_of[str(c)] for c in cats.categories], dtype=object)[cats.codes.to_numpy()]
    return {str(a): g.reset_index(drop=True) for a, g in curves.groupby(by_agent, sort=True)}, notes, bounds
