"""A family's leaderboard read and summarised per run identity, on records: no pandas.

``bench leaderboard`` starts in well under 1 s of CPU because this module needs only pyarrow
(to read the Parquet file) and numpy (which pyarrow loads anyway); :func:`~.leaderboard.summarize`
is the same computation on a frame, through :func:`summarize_records`.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.compare.cfg import identity_of
from harness.envs.manifest import Direction
from harness.stats.estimators import mean_sem

SUMMARY_COLUMNS: tuple[str, ...] = (
    "variant",
    "identity",
    "device",
    "agent",
    "direction",
    "runs",
    "older_duplicates",
    "scored",
    "seeds",
    "best",
    "score_mean",
    "score_sem",
    "progress_mean",
    "progress_sem",
    "n_infra_error",
    "cost_usd",
)
"""Columns of a summary row (:func:`summarize_records`), in order."""

REQUIRED_COLUMNS: tuple[str, ...] = ("variant", "agent", "seed", "best_score", "progress", "direction")
"""Leaderboard columns a summary cannot do without."""

_FAMILY = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def leaderboard_path(directory: Path, family: str) -> Path:
    """Path of a family's leaderboard file.

    Raises:
        ValueError: If ``family`` is not a plain name.
    """
    if not _FAMILY.match(family):
        raise ValueError(f"invalid family name {family!r}")
    return Path(directory) / f"{family}.parquet"


def read_records(directory: Path, family: str) -> list[dict[str, Any]]:
    """A family's leaderboard rows as records (column -> value; nulls as None), with pyarrow only.

    Columns a file predates are simply absent from its records (read them with ``.get``).

    Raises:
        ValueError: If ``family`` is not a plain name.
        pyarrow.ArrowInvalid: If the file is unreadable.
    """
    path = leaderboard_path(directory, family)
    if not path.exists():
        return []
    import pyarrow.parquet as pq

    # ParquetFile, not read_table: read_table goes through pyarrow.dataset, which imports pandas
    records: list[dict[str, Any]] = pq.ParquetFile(path).read().to_pylist()
    return records


def number(value: Any) -> float | None:
    """A numeric cell as a float; None for null, NaN or anything not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return None if math.isnan(value) else float(value)


def device_of(row: Mapping[str, Any]) -> str:
    """The GPU a row was timed on, ``""`` where none (not recorded, or ``cpu``: no CPU model named)."""
    d = row.get("device")
    return d if isinstance(d, str) and d != "cpu" else ""


def _group(
    variant: str, identity: str, device: str, g: list[Mapping[str, Any]], older: int
) -> dict[str, Any]:
    direction = Direction(str(g[0]["direction"]))
    bests = [number(r["best_score"]) for r in g]
    scores = [b for b in bests if b is not None]
    # a failed run (no best score) enters the progress statistics with u = 0
    progress = [0.0 if b is None else (number(r["progress"]) or 0.0) for r, b in zip(g, bests, strict=True)]
    score_mean, score_sem = mean_sem(scores)
    progress_mean, progress_sem = mean_sem(progress)
    best = (max(scores) if direction is Direction.MAXIMIZE else min(scores)) if scores else math.nan
    return {
        "variant": variant,
        "identity": identity,
        "device": device,
        "agent": str(g[0]["agent"]),
        "direction": str(direction),
        "runs": len(g),
        "older_duplicates": older,
        "scored": len(scores),
        "seeds": len({r["seed"] for r in g}),
        "best": best,
        "score_mean": score_mean,
        "score_sem": score_sem,
        "progress_mean": progress_mean,
        "progress_sem": progress_sem,
        "n_infra_error": int(sum(number(r.get("n_infra_error")) or 0 for r in g)),
        "cost_usd": float(math.fsum(number(r.get("cost_usd")) or 0.0 for r in g)),
    }


def summarize_records(
    records: Iterable[Mapping[str, Any]], variant: str | None = None
) -> list[dict[str, Any]]:
    """Aggregate leaderboard rows per (variant, run identity, device); see :func:`.leaderboard.summarize`.

    Args:
        records: Leaderboard rows as mappings (as from :func:`read_records`).
        variant: Keep only this variant id; None keeps all.

    Returns:
        One dict per group with :data:`SUMMARY_COLUMNS`, sorted by variant, then by mean progress
        (descending), then identity and device.

    Raises:
        KeyError: If a row lacks one of :data:`REQUIRED_COLUMNS`.
        ValueError: If one variant's rows disagree on the score direction.
    """
    rows = list(records)
    for r in rows:
        if missing := [c for c in REQUIRED_COLUMNS if c not in r]:
            raise KeyError(f"leaderboard rows lack columns {missing}")
    if variant is not None:
        rows = [r for r in rows if r["variant"] == variant]
    directions: dict[str, set[str]] = {}
    for r in rows:
        directions.setdefault(str(r["variant"]), set()).add(str(r["direction"]))
    for v, ds in sorted(directions.items()):
        if len(ds) != 1:
            raise ValueError(f"variant {v!r} has rows with mixed directions {sorted(ds)}")

    def finished(r: Mapping[str, Any]) -> tuple[bool, str]:  # unrecorded times sort last, as NaN does
        t = r.get("finished_at")
        return (not isinstance(t, str), t if isinstance(t, str) else "")

    rows.sort(key=finished)  # stable: ties keep their order (the one appended last wins)
    newest: dict[tuple[str, str, str, Any], Mapping[str, Any]] = {}
    older: Counter[tuple[str, str, str]] = Counter()
    for r in rows:
        key = (str(r["variant"]), identity_of(r), device_of(r))
        if (*key, r["seed"]) in newest:
            older[key] += 1
        newest[(*key, r["seed"])] = r
    groups: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for r in rows:  # in finishing order, the kept run of each seed only
        key = (str(r["variant"]), identity_of(r), device_of(r))
        if newest[(*key, r["seed"])] is r:
            groups.setdefault(key, []).append(r)
    out = [_group(*key, g, older[key]) for key, g in groups.items()]
    out.sort(key=lambda s: (s["variant"], -s["progress_mean"], s["identity"], s["device"]))
    return out
