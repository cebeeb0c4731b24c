"""Per-case section of the run report: the best evaluation's verdicts and each case's record."""

from __future__ import annotations

import json
from collections import Counter

import pandas as pd

from . import page


def _cases(cell: object) -> list[dict[str, object]]:
    try:
        out = json.loads(str(cell)) if cell is not None else []
    except ValueError:
        return []
    return out if isinstance(out, list) else []


def _secs(v: object) -> str:
    return "-" if v is None else f"{float(v):.3f}"  # type: ignore[arg-type]


def cases_section(cands: pd.DataFrame, maximize: bool) -> str:
    """Per-case verdicts of the best evaluation, and per case how often each verdict occurred.

    Returns:
        HTML (a note when the family reports no cases).
    """
    if cands.empty or "cases_json" not in cands.columns:
        return "<p>No per-case results in this run.</p>"
    per_case: dict[str, Counter[str]] = {}
    for cell in cands["cases_json"]:
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
            for c in _cases(best["cases_json"])
        ]
        html += f"<p>Best evaluation (seq {int(best['seq'])}):</p>"
        html += page.table(["case", "status", "score", "CPU s", "wall-clock s", "reason"], rows)
    statuses = sorted({s for cnt in per_case.values() for s in cnt})
    counts = [(name, *(cnt[s] for s in statuses)) for name, cnt in sorted(per_case.items())]
    html += "<p>Verdicts per case over all evaluations:</p>"
    return html + page.table(["case", *statuses], counts)
