"""Render a :class:`~harness.compare.paired.Comparison` and leaderboards as tables any tool can read."""

from __future__ import annotations

import html
import io
import json
import math
from typing import Any

import pandas as pd
from rich.console import Group
from rich.table import Table
from rich.text import Text

from .paired import Comparison

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
)
"""Columns of :func:`comparison_frame` (one tidy table for CSV)."""


def _f(x: float, digits: int = 3) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}g}"


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
            }
        )
    return pd.DataFrame(rows, columns=list(LONG_COLUMNS))


def comparison_csv(c: Comparison) -> str:
    """CSV of :func:`comparison_frame`."""
    return comparison_frame(c).to_csv(index=False)


def comparison_json(c: Comparison) -> str:
    """JSON of the whole comparison (paired rows, aggregates, per-run values, notes)."""
    return json.dumps(c.to_dict(), indent=2, sort_keys=False)


def comparison_rich(c: Comparison) -> Group:
    """Rich renderables: the paired table, the aggregate table and the notes."""
    pct = f"{c.level:.0%}"
    t = Table(title=f"Paired by seed, A - B ({c.budget}); {pct} bootstrap CI, permutation p, Holm-adjusted")
    for col in (
        "variant",
        "metric",
        "A",
        "B",
        "pairs",
        "mean A",
        "mean B",
        "A - B",
        f"{pct} CI",
        "p",
        "p Holm",
        "missing",
    ):
        t.add_column(col, overflow="fold")
    for r in c.paired:
        missing = "; ".join(
            f"{who}: seed {' '.join(map(str, seeds))}"
            for who, seeds in ((r.agent_a, r.missing_a), (r.agent_b, r.missing_b))
            if seeds
        )
        sig = r.p_holm <= 1.0 - c.level if not math.isnan(r.p_holm) else False
        t.add_row(
            r.variant,
            r.metric,
            r.agent_a,
            r.agent_b,
            f"{r.n_pairs}/{r.n_seeds}",
            _f(r.mean_a, 4),
            _f(r.mean_b, 4),
            Text(_f(r.delta, 3), style="bold" if sig else ""),
            f"[{_f(r.ci_lo)}, {_f(r.ci_hi)}] {r.ci_method if r.ci_method != 'BCa' else ''}".rstrip(),
            _f(r.p_value, 3),
            Text(_f(r.p_holm, 3), style="bold green" if sig else ""),
            missing or "-",
        )
    parts: list[Any] = [t]
    if c.aggregates:
        g = Table(title=f"Across variants (normalised progress u), {pct} stratified bootstrap CI")
        for col in ("statistic", "estimate", f"{pct} CI", "runs", "variants"):
            g.add_column(col)
        for a in c.aggregates:
            name = f"IQM({a.agent_a})" if a.kind == "iqm" else f"P({a.agent_a} > {a.agent_b})"
            g.add_row(
                name, _f(a.estimate, 3), f"[{_f(a.ci_lo)}, {_f(a.ci_hi)}]", str(a.n_runs), str(a.n_variants)
            )
        parts.append(g)
    for n in c.notes:
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
