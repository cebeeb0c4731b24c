"""Figures: best-so-far curves with CI bands across seeds, and RL training diagnostics.

Figures are built on ``matplotlib.figure.Figure`` directly (no pyplot global state, no GUI
backend), and every line is labelled at its end in its own colour, right of the axes (outside the
data), so no legend box is needed. Figures are saved with a tight bounding box, so the wrapped
caption and the end labels are inside the image (PNG and SVG alike).
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from harness.compare.anytime import Axis, on_grid, progress_of

from .axes import ScoreAxis

AXIS_LABELS: dict[str, str] = {
    "evaluations": "evaluations",
    "wall_s": "wall time (s)",
    "cost_usd": "LLM cost (USD)",
}

TRAIN_COLUMNS = (
    "step",
    "adapter_version",
    "loss",
    "entropy",
    "grad_norm",
    "clip_frac",
    "kl",
    "alpha",
    "reward_mean",
    "reward_std",
    "skipped",
    "skip_reason",
)
"""Columns of ``train.parquet`` the diagnostics read (any subset but ``step`` may be absent)."""

_PANELS = (
    ("reward_mean", "reward (mean ± std)"),
    ("loss", "loss"),
    ("entropy", "entropy"),
    ("grad_norm", "gradient norm"),
    ("kl", "KL"),
    ("alpha", "α_t"),
    ("clip_frac", "clip fraction"),
    ("skipped", "skipped steps (cumulative)"),
)
_COLORS = ("#1b6ca8", "#d1495b", "#2e8b57", "#8e44ad", "#e67e22", "#34495e", "#c0392b", "#16a085")
_CAPTION_CHARS = 92
"""Caption lines are wrapped at this many characters: the 8-inch figure holds ~100 at 10 pt."""
REFERENCE_COLOR = "0.35"
"""Colour of horizontal reference lines (initial program, target, published programs)."""


def legend_label(unit: str) -> str:
    """The name a curve is labelled with in a figure: the one place figure labels come from.

    Args:
        unit: The unit's key (an identity ``agent@cfg`` or the ``=LABEL`` the user gave).
    """
    return unit


def band(
    values: np.ndarray, level: float = 0.95, n_resamples: int = 1000, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mean across runs at each grid point with a percentile bootstrap band (runs resampled).

    A point is drawn only where every run has a value: averaging the runs that happen to have
    one would let the mean fall when a weak run gets its first score (the mean of best-so-far
    curves is then no longer monotone, and "n" would be wrong).

    Args:
        values: (runs, points) array; NaN where a run has no value (yet).
        level: Confidence level.
        n_resamples: Bootstrap resamples.
        seed: Seed of the resampling.

    Returns:
        Mean, lower and upper band (NaN where some run has no value), and the number of runs
        with a value at each point.
    """
    count = np.sum(~np.isnan(values), axis=0)
    full = count == values.shape[0]
    mean = np.full(values.shape[1], np.nan)
    lo, hi = mean.copy(), mean.copy()
    if values.shape[0] == 0 or not full.any():
        return mean, lo, hi, count
    v = values[:, full]
    mean[full] = v.mean(axis=0)
    if values.shape[0] < 2:
        lo[full], hi[full] = mean[full], mean[full]
        return mean, lo, hi, count
    idx = np.random.default_rng(seed).integers(0, v.shape[0], size=(n_resamples, v.shape[0]))
    a = (1 - level) / 2
    lo[full], hi[full] = np.quantile(v[idx].mean(axis=1), [a, 1 - a], axis=0)
    return mean, lo, hi, count


def run_values(
    c: pd.DataFrame, axis: Axis, grid: np.ndarray, value: str = "value", fill: float | None = None
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each run's step curve on ``grid``, carried from the run's start (x = 0) past its end.

    Args:
        c: Curves of one unit with a ``value`` column.
        axis: x axis.
        grid: Increasing x values (>= 0).
        value: Column to sample.
        fill: Value from the run's start until its first point (``u``: 0, nothing reached yet);
            None leaves NaN (a raw score does not exist before the first success).

    Returns:
        Run ids, the (runs, points) values and each run's end on ``axis``.
    """
    runs, vals = on_grid(c, axis, grid, value)
    if fill is not None:
        vals = np.where(np.isnan(vals), fill, vals)
    ends = c.groupby("run_id", sort=True, observed=True)[axis].max().to_numpy(dtype=np.float64)
    return runs, vals, ends


def _grid(curves: Mapping[str, pd.DataFrame], axis: Axis) -> np.ndarray:
    top = max(float(c[axis].max()) for c in curves.values() if not c.empty)
    if axis == "evaluations":
        return np.arange(1, int(top) + 1, dtype=np.float64)
    if not top > 0:
        what = (
            "LLM cost was recorded (offline proposer or free model)" if axis == "cost_usd" else "time elapsed"
        )
        raise ValueError(f"no {what} in these runs: nothing to plot against {AXIS_LABELS[axis]}")
    return np.linspace(0.0, top, 300)


def _place_labels(ends: list[float], span: float) -> list[float]:
    """Nudge end-of-line label heights apart by at least 5 % of the y span, keeping their order."""
    order = np.argsort(ends)
    gap = 0.05 * (span or 1.0)
    placed = np.asarray(ends, dtype=np.float64)[order].copy()
    for i in range(1, placed.size):
        placed[i] = max(placed[i], placed[i - 1] + gap)
    out = np.empty_like(placed)
    out[order] = placed
    return out.tolist()


def curves_figure(
    curves: Mapping[str, pd.DataFrame],
    *,
    axis: Axis = "evaluations",
    metric: str = "score",
    y_floor: float | None = None,
    y_target: float | None = None,
    title: str = "",
    level: float = 0.95,
    references: Mapping[str, float] | None = None,
    score: ScoreAxis | None = None,
    y_init: float | None = None,
) -> Figure:
    """Best-so-far curves, one per agent: mean across seeds and a bootstrap CI band.

    The initial program's score (``y_init``) and the target (``y_target``) are drawn as labelled
    horizontal lines where known; so are ``references`` (label -> score of a published program
    scored here), never as runs. Where a seed's run ends before the others, a tick on its unit's
    line marks it (its final best is carried on in the mean).

    Args:
        curves: Agent -> its runs' curves (:func:`~harness.compare.anytime.best_so_far`).
        axis: x axis.
        metric: ``score`` (raw best score) or ``u`` (normalised progress; needs the bounds).
        y_floor: Score at u = 0 (for ``u``; :attr:`Progress.y_floor` of the runs' draw).
        y_target: Score regarded as solved (u = 1); drawn as the target line.
        title: Figure title.
        level: Confidence level of the bands.
        references: Label -> score of a published reference program (dashed lines).
        score: The combined metric's name, unit and direction (y-axis label); None: "score".
        y_init: The initial program's score on the runs' draw (a reference line).

    Returns:
        The figure.

    Raises:
        ValueError: If there is nothing to plot, the axis has no spread, or ``u`` lacks bounds.
    """
    if not curves or all(c.empty for c in curves.values()):
        raise ValueError("no runs to plot")
    if metric == "u" and (y_floor is None or y_target is None):
        raise ValueError("metric u needs y_floor and y_target")

    def on_scale(y: float) -> float:
        return float(progress_of(pd.Series([y]), float(y_floor), float(y_target))[0]) if metric == "u" else y  # type: ignore[arg-type]

    grid = _grid(curves, axis)
    fig = Figure(figsize=(8.0, 4.8), layout="constrained")
    ax = fig.add_subplot()
    ends: list[tuple[str, float, str]] = []
    marked_any = False
    for i, (agent, c) in enumerate(sorted(curves.items())):
        if c.empty:
            continue
        c = c.copy()
        if metric == "u":
            c["value"] = progress_of(c["best"], float(y_floor), float(y_target))  # type: ignore[arg-type]
        else:
            c["value"] = c["best"]
        runs, vals, run_ends = run_values(c, axis, grid, fill=0.0 if metric == "u" else None)
        mean, lo, hi, count = band(vals, level=level)
        color = _COLORS[i % len(_COLORS)]
        ax.plot(grid, mean, color=color, lw=2, drawstyle="steps-post")
        # A run that ended before the last one is carried at its final best: one tick on the line
        # where it ended (a dashed tail from the first end dashed nearly all of a wall-time curve,
        # whose mean starts only when the slowest run has scored).
        marked_any |= _mark_run_ends(ax, grid, mean, run_ends, color)
        if len(runs) > 1:
            ax.fill_between(grid, lo, hi, color=color, alpha=0.18, step="post", lw=0)
        finite = np.flatnonzero(np.isfinite(mean))
        n_max = int(count.max()) if count.size else 0
        what = f"n={len(runs)}" + ("" if n_max == len(runs) else f", {n_max} scored")
        end = float(mean[finite[-1]]) if finite.size else math.nan
        ends.append((f"{legend_label(agent)} ({what})", end, color))
    lines = [(f"[ref] {name}", value, "--") for name, value in sorted((references or {}).items())]
    if y_init is not None:
        lines.append(("initial program", y_init, ":"))
    if y_target is not None:
        lines.append(("target", y_target, "-."))
    for text, value, style in lines:
        ax.axhline(on_scale(float(value)), color=REFERENCE_COLOR, ls=style, lw=1.2)
        ends.append((text, on_scale(float(value)), REFERENCE_COLOR))
    ymin, ymax = ax.get_ylim()
    heights = [e[1] if math.isfinite(e[1]) else ymin for e in ends]
    for (text, _, color), y in zip(ends, _place_labels(heights, ymax - ymin), strict=True):
        ax.annotate(
            text,
            xy=(1.01, y),
            xycoords=("axes fraction", "data"),
            color=color,
            fontsize=10,
            va="center",
            fontweight="bold",
        )
    ax.set_xlabel(AXIS_LABELS[axis])
    if axis == "evaluations":  # a count: no 2.5 evaluations
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    if score is not None:
        ax.set_ylabel(score.label(metric))
    else:
        ax.set_ylabel("best-so-far progress u" if metric == "u" else "best-so-far score")
    ax.grid(alpha=0.3)
    ax.spines[["top", "right"]].set_visible(False)
    head = [title or f"best so far vs {AXIS_LABELS[axis]}"]
    if any(c["run_id"].nunique() > 1 for c in curves.values() if not c.empty):
        head.append(f"line: mean of all n seeds where every run has a value; band: {level:.0%} bootstrap CI")
    if marked_any:
        head.append("tick on a line: a seed's run had ended by there (its final best is carried on)")
    fig.suptitle(caption(head), fontsize=10)
    return fig


def caption(parts: Sequence[str], width: int = _CAPTION_CHARS) -> str:
    """Caption text wrapped to ``width`` characters a line, so it fits the figure's width."""
    return "\n".join(textwrap.fill(p, width, break_on_hyphens=False) for p in parts)


def _mark_run_ends(ax: object, grid: np.ndarray, mean: np.ndarray, run_ends: np.ndarray, color: str) -> bool:
    """Tick marks on a unit's mean line where one of its runs ended before the last one did.

    A run that ended before the mean exists (the slowest run had not scored yet) is marked at the
    line's start: from there on its final best is carried.

    Returns:
        Whether any tick was drawn.
    """
    last = float(run_ends.max()) if run_ends.size else math.nan
    finite = np.flatnonzero(np.isfinite(mean))
    xs, ys = [], []
    for e in run_ends:
        if not e < last:
            continue
        later = finite[finite >= max(int(np.searchsorted(grid, e, side="right")) - 1, 0)]
        if later.size:
            xs.append(max(float(e), float(grid[later[0]])))
            ys.append(float(mean[later[0]]))
    if xs:
        ax.plot(xs, ys, ls="none", marker="|", ms=12, mew=2, color=color)  # type: ignore[attr-defined]
    return bool(xs)


def train_figure(train: pd.DataFrame, title: str = "RL training diagnostics") -> Figure:
    """One small panel per diagnostic present in a ``train.parquet`` frame, x = step.

    Args:
        train: Rows of ``train.parquet`` (see :data:`TRAIN_COLUMNS`).
        title: Figure title.

    Returns:
        The figure.

    Raises:
        ValueError: If ``step`` is missing or no diagnostic column is present.
    """
    if "step" not in train:
        raise ValueError("train.parquet has no 'step' column")
    panels = [
        (c, label)
        for c, label in _PANELS
        if c in train and pd.to_numeric(train[c], errors="coerce").notna().any()
    ]
    if not panels:
        raise ValueError(f"train.parquet has none of the diagnostic columns {[c for c, _ in _PANELS]}")
    df = train.sort_values("step", kind="stable")
    step = pd.to_numeric(df["step"]).to_numpy(dtype=np.float64)
    ncols = 2 if len(panels) > 1 else 1
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(5.0 * ncols, 2.4 * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True)
    for k, (col, label) in enumerate(panels):
        ax = axes[k // ncols][k % ncols]
        y = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
        color = _COLORS[k % len(_COLORS)]
        if col == "skipped":
            y = np.cumsum(np.nan_to_num(y) > 0)
            ax.step(step, y, where="post", color=color, lw=1.8)
            ax.yaxis.set_major_locator(MaxNLocator(integer=True))
            if "skip_reason" in df:
                reasons = df.loc[
                    np.nan_to_num(pd.to_numeric(df[col], errors="coerce").to_numpy()) > 0, "skip_reason"
                ]
                counts = reasons.fillna("?").astype(str).value_counts()
                if not counts.empty:
                    text = "\n".join(f"{n}× {r[:28]}" for r, n in counts.head(4).items())
                    ax.text(0.02, 0.95, text, transform=ax.transAxes, va="top", fontsize=8, color="#444")
        else:
            ax.plot(step, y, color=color, lw=1.5)
            if col == "reward_mean" and "reward_std" in df:
                sd = pd.to_numeric(df["reward_std"], errors="coerce").to_numpy(dtype=np.float64)
                ax.fill_between(step, y - sd, y + sd, color=color, alpha=0.18, lw=0)
        ax.set_title(label, fontsize=10, color=color, loc="left", fontweight="bold")
        ax.grid(alpha=0.3)
        ax.spines[["top", "right"]].set_visible(False)
    for k in range(len(panels), nrows * ncols):
        axes[k // ncols][k % ncols].set_visible(False)
    for ax in axes.flat:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are counts
    for ax in axes[-1]:
        ax.set_xlabel("step")
    fig.suptitle(caption([title]), fontsize=11)
    return fig


def save(fig: Figure, path: Path) -> Path:
    """Write a figure as PNG or SVG, chosen by the file suffix.

    Raises:
        ValueError: If the suffix is neither ``.png`` nor ``.svg``.
    """
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg"):
        raise ValueError(f"plot file must end in .png or .svg, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(
        path,
        format=fmt,
        dpi=120,
        metadata={"Date": None} if fmt == "svg" else None,
        bbox_inches="tight",  # every caption line and end label inside the image
        pad_inches=0.1,
    )
    return path


def svg_text(fig: Figure) -> str:
    """The figure as an inline SVG element (no XML prolog, no external references)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None}, bbox_inches="tight", pad_inches=0.1)
    text = buf.getvalue()
    return text[text.index("<svg") :]
