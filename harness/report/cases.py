"""Per-case section of the run report: the best evaluation's verdicts and each case's record."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd

from . import page


def _cases(cell: Any) -> list[dict[str, object]]:
    """The verdicts of one ``cases`` cell (a list of structs: pandas gives an array of dicts)."""
    if cell is None or isinstance(cell, (str, bytes, float)):
        return []
    return [c for c in cell if isinstance(c, dict)]


def _secs(v: object) -> str:
    return "-" if v is None else f"{float(v):.3f}"  # type: ignore[arg-type]


def cases_section(cands: pd.DataFrame, maximize: bool) -> str:
    """Per-case verdicts of the best evaluation, and per case how often each verdict occurred.

    Returns:
        HTML (a note when the family reports no cases).
    """
    if cands.empty or "cases" not in cands.columns:
        return "<p>No per-case results in this run.</p>"
    per_case: dict[str, Counter[str]] = {}
    for cell in cands["cases"]:
        for c in _cases(cell):
            per_case.setdefault(str(c.get("name")), Counter())[str(c.get("status"))] += 1
    if not per_case:
        return "<p>This family reports no per-case results.</p>"
    html = ""
    ok = cands[(cands["status"].astype(str) == "ok") & cands["score"].notna()]
    if not ok.empty:
        best = ok.sort_values(["score", "seq"], ascending=[not maximize, True]).iloc[0]
        rows = [
            (
                c.get("name"),
                c.get("status"),
                c.get("score"),
                _secs(c.get("cpu_seconds")),
                _secs(c.get("wall_seconds")),
                str(c.get("reason") or "")[:200],
            )
            for c in _cases(best["cases"])
        ]
        html += f"<p>Best evaluation (seq {int(best['seq'])}):</p>"
        html += page.table(["case", "status", "score", "CPU s", "wall-clock s", "reason"], rows)
    statuses = sorted({s for cnt in per_case.values() for s in cnt})
    counts = [(name, *(cnt[s] for s in statuses)) for name, cnt in sorted(per_case.items())]
    html += "<p>Verdicts per case over all evaluations:</p>"
    return html + page.table(["case", *statuses], counts)
