"""Render a :class:`~harness.compare.paired.Comparison` and leaderboards as tables any tool can read."""

from __future__ import annotations

import html
import io
import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
from rich.console import Group
from rich.table import Table
from rich.text import Text

from .paired import AggregateRow, Comparison, PairedRow

LONG_COLUMNS = (
    "section",
    "variant",
    "metric",
    "agent_a",
    "agent_b",
    "estimate",
    "ci_lo",
    "ci_hi",
    "ci_method",
    "p_value",
    "p_holm",
    "n_pairs",
    "n_seeds",
    "missing_a",
    "missing_b",
    "mean_a",
    "mean_b",
    "better",
)
"""Columns of :func:`comparison_frame` (one tidy table for CSV)."""


def _f(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


_METRIC_NAMES = {"u": "u", "score": "best score", "auc": "AUC"}


def _no_interval_reason(r: PairedRow) -> str | None:
    """Why a paired row has no confidence interval (None: it has one)."""
    if r.ci_method == "degenerate":
        return "every seed pair gave the same difference, so there is no spread to bootstrap"
    if r.ci_method != "none":
        return None
    if r.n_pairs == 0:
        return "no seed with a value on both sides (a side never scored)"
    if r.n_pairs == 1:
        return "a single seed pair, and one value has no interval"
    return "the bootstrap gave no finite interval"


def split_intervals(
    rows: Sequence[PairedRow], name: Callable[[str], str] = str
) -> tuple[list[PairedRow], list[str]]:
    """The rows that have a confidence interval, and one note per reason the others have none.

    A comparison of near-identical runs is mostly rows like ``[0, 0] degenerate``; printing each
    says nothing the one sentence does not. The note names each left-out (pair, metric) with its
    difference, so no figure is lost.

    Args:
        rows: Paired rows of a comparison.
        name: How an agent label is printed (e.g. an alias).

    Returns:
        The rows with an interval, in order, and the notes (one per reason).
    """
    shown: list[PairedRow] = []
    why: dict[str, dict[tuple[str, str, str], list[str]]] = {}
    several = len({r.variant for r in rows}) > 1
    for r in rows:
        reason = _no_interval_reason(r)
        if reason is None:
            shown.append(r)
            continue
        value = f" = {_f(r.delta)}" if not math.isnan(r.delta) else ""
        key = (r.variant, name(r.agent_a), name(r.agent_b))
        metric = _METRIC_NAMES.get(r.metric, r.metric)
        why.setdefault(reason, {}).setdefault(key, []).append(f"{metric}{value}")
    notes = []
    for reason, items in why.items():
        parts = [
            f"{f'{v}: ' if several else ''}{a} − {b}: {', '.join(ms)}" for (v, a, b), ms in items.items()
        ]
        notes.append(f"no confidence interval where {reason} ({'; '.join(parts)}); those rows are left out")
    return shown, notes


def split_aggregates(
    rows: Sequence[AggregateRow], name: Callable[[str], str] = str
) -> tuple[list[AggregateRow], str | None]:
    """The aggregates with a spread, and one note for those whose every resample was the same.

    Returns:
        The aggregate rows whose interval has a width, and the note (None when none is left out).
    """
    shown = [g for g in rows if not (g.ci_lo == g.ci_hi or math.isnan(g.ci_lo))]
    flat = [g for g in rows if g not in shown]
    if not flat:
        return shown, None
    parts = [f"{aggregate_name(g, name)} = {_f(g.estimate)}" for g in flat]
    return shown, (
        f"no interval where every bootstrap resample gave the same value ({'; '.join(parts)}); "
        "those rows are left out"
    )


def aggregate_name(g: AggregateRow, name: Callable[[str], str] = str) -> str:
    """``IQM(A)`` or ``P(A > B)`` with the labels printed by ``name``."""
    return f"IQM({name(g.agent_a)})" if g.kind == "iqm" else f"P({name(g.agent_a)} > {name(g.agent_b)})"


def comparison_frame(c: Comparison) -> pd.DataFrame:
    """One long table: ``paired`` rows per (variant, metric, pair), then ``iqm`` and ``poi`` rows."""
    rows: list[dict[str, Any]] = []
    for r in c.paired:
        rows.append(
            {
                "section": "paired",
                "variant": r.variant,
                "metric": r.metric,
                "agent_a": r.agent_a,
                "agent_b": r.agent_b,
                "estimate": r.delta,
                "ci_lo": r.ci_lo,
                "ci_hi": r.ci_hi,
                "ci_method": r.ci_method,
                "p_value": r.p_value,
                "p_holm": r.p_holm,
                "n_pairs": r.n_pairs,
                "n_seeds": r.n_seeds,
                "missing_a": " ".join(map(str, r.missing_a)),
                "missing_b": " ".join(map(str, r.missing_b)),
                "mean_a": r.mean_a,
                "mean_b": r.mean_b,
                "better": "higher" if r.maximize else "lower",
            }
        )
    for g in c.aggregates:
        rows.append(
            {
                "section": g.kind,
                "variant": "*",
                "metric": "u",
                "agent_a": g.agent_a,
                "agent_b": g.agent_b,
                "estimate": g.estimate,
                "ci_lo": g.ci_lo,
                "ci_hi": g.ci_hi,
                "ci_method": "stratified percentile",
                "n_pairs": g.n_runs,
                "n_seeds": g.n_variants,
                "better": "higher",
            }
        )
    return pd.DataFrame(rows, columns=list(LONG_COLUMNS))


def comparison_csv(c: Comparison) -> str:
    """CSV of :func:`comparison_frame`."""
    return comparison_frame(c).to_csv(index=False)


def comparison_json(c: Comparison) -> str:
    """JSON of the whole comparison (paired rows, aggregates, per-run values, notes)."""
    return json.dumps(c.to_dict(), indent=2, sort_keys=False)


WIDE = 110
"""From this console width on, the paired table also shows each side's mean."""


def aliases(labels: tuple[str, ...]) -> dict[str, str]:
    """Short, distinct names for the tables (``A``, ``B``, ...; ``A1``... past 26), legend printed above.

    Identity labels (``pacevolve@3fa2c1``) are too long for 80 columns; truncating them would
    make ``pacevolve`` and ``pacevolve++`` look alike, so they are replaced, never cut.
    """
    letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if len(labels) <= len(letters):
        return {a: letters[i] for i, a in enumerate(labels)}
    return {a: f"A{i + 1}" for i, a in enumerate(labels)}


def comparison_rich(c: Comparison, width: int = 80) -> Group:
    """Rich renderables: legend, one paired table per variant, the aggregate table and the notes.

    Sized for ``width`` columns: agents appear under short aliases (legend first), numbers never
    wrap, every score row carries its direction (↑ higher is better, ↓ lower is better).
    """
    pct = f"{c.level:.0%}"
    short = aliases(c.agents)
    parts: list[Any] = [Text(f"{short[a]} = {a}", overflow="fold") for a in c.agents]
    parts.append(
        Text(
            f"A − B per seed ({c.budget}); {pct} bootstrap CI; permutation p, Holm-adjusted\n"
            "↑ higher is better: A − B > 0 favours A\n↓ lower is better: A − B > 0 favours B",
            style="dim",
        )
    )
    wide = width >= WIDE
    shown, no_ci = split_intervals(c.paired, lambda a: short[a])
    variants = list(dict.fromkeys(r.variant for r in shown))
    for v in variants:
        t = Table(title=v, title_justify="left", box=None, pad_edge=False, padding=(0, 1))
        t.add_column("metric", no_wrap=True)
        t.add_column("pair", no_wrap=True)
        t.add_column("n", no_wrap=True, justify="right")
        if wide:
            t.add_column("mean A", no_wrap=True, justify="right")
            t.add_column("mean B", no_wrap=True, justify="right")
        for col in ("A − B", f"{pct} CI", "p", "p Holm"):
            t.add_column(col, no_wrap=True, justify="right")
        for r in (r for r in shown if r.variant == v):
            sig = r.p_holm <= 1.0 - c.level if not math.isnan(r.p_holm) else False
            means = [_f(r.mean_a, 4), _f(r.mean_b, 4)] if wide else []
            t.add_row(
                f"{r.metric} {'↑' if r.maximize else '↓'}",
                f"{short[r.agent_a]}−{short[r.agent_b]}",
                f"{r.n_pairs}/{r.n_seeds}",
                *means,
                Text(_f(r.delta, 3), style="bold" if sig else ""),
                f"[{_f(r.ci_lo)}, {_f(r.ci_hi)}]" + ("*" if r.ci_method == "percentile" else ""),
                _f(r.p_value, 3),
                Text(_f(r.p_holm, 3), style="bold green" if sig else ""),
            )
        parts.append(t)
    if any(r.ci_method == "percentile" for r in shown):
        parts.append(Text("*: percentile interval (too few pairs for BCa)", style="dim"))
    aggregates, flat = split_aggregates(c.aggregates, lambda a: short[a])
    if aggregates:
        g = Table(
            title=f"Across variants: progress u ↑, {pct} stratified bootstrap CI",
            title_justify="left",
            box=None,
            pad_edge=False,
            padding=(0, 1),
        )
        for col in ("statistic", "estimate", f"{pct} CI", "runs", "variants"):
            g.add_column(col, no_wrap=True)
        for a in aggregates:
            g.add_row(
                aggregate_name(a, lambda x: short[x]),
                _f(a.estimate, 3),
                f"[{_f(a.ci_lo)}, {_f(a.ci_hi)}]",
                str(a.n_runs),
                str(a.n_variants),
            )
        parts.append(g)
    for n in [*no_ci, *([flat] if flat else []), *c.notes]:
        parts.append(Text(f"note: {n}", style="yellow"))
    return Group(*parts)


def frame_markdown(df: pd.DataFrame) -> str:
    """GitHub-flavoured Markdown table of a frame (pipes escaped, NaN as empty)."""

    def cell(x: Any) -> str:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return ""
        s = f"{x:.6g}" if isinstance(x, float) else str(x)
        return s.replace("|", "\\|").replace("\n", " ")

    head = "| " + " | ".join(map(cell, df.columns)) + " |"
    sep = "| " + " | ".join("---" for _ in df.columns) + " |"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, sep, *body]) + "\n"


def frame_html(df: pd.DataFrame, title: str) -> str:
    """A standalone HTML page holding the frame as a table (inline CSS, no external resources)."""
    buf = io.StringIO()
    df.to_html(buf, index=False, na_rep="", float_format=lambda x: f"{x:.6g}", border=0)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>"
        + html.escape(title)
        + "</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "th,td{padding:4px 10px;border-bottom:1px solid #ddd;text-align:right}th{background:#f4f4f4}"
        "</style></head><body><h1>" + html.escape(title) + "</h1>" + buf.getvalue() + "</body></html>\n"
    )
