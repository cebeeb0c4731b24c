"""Output that cannot mislead: score direction on every row, 80 columns, distinct labels (issue 23 case 7)."""

from __future__ import annotations

import io
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console

from evobench.cli import commands_info, run_exec
from harness.compare.paired import compare
from harness.compare.select import VariantRuns
from harness.compare.tables import aliases, comparison_frame, comparison_rich


def _render(renderable: Any, width: int) -> str:
    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None).print(renderable)
    return buf.getvalue()


def _vr(variant: str, maximize: bool) -> VariantRuns:
    rows = [
        {
            "run_id": f"{a}{s}",
            "agent": a,
            "seed": s,
            "score": 100.123456 * k + s * k,
            "u": 0.1 * k + 0.01 * s,
            "auc": 0.05 * k + 0.001 * s * k,
        }
        for k, a in enumerate(("pacevolve@3fa2c1", "pacevolve++@77e0b2"), start=1)
        for s in range(5)
    ]
    return VariantRuns(variant, "h", maximize, pd.DataFrame(rows))


def test_compare_fits_80_columns_with_direction_and_whole_numbers() -> None:
    agents = ("pacevolve@3fa2c1", "pacevolve++@77e0b2")
    c = compare([_vr("llm-sr-tiny", False), _vr("eplb-tiny", True)], agents, n_resamples=200)
    text = _render(comparison_rich(c, width=80), 80)
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 80
    assert "A = pacevolve@3fa2c1" in text and "B = pacevolve++@77e0b2" in text  # legend, never cut
    rows = [x for x in lines if re.match(r"^(u|score|auc) [↑↓]", x)]
    assert len(rows) == 6  # every paired row carries its direction
    assert sum(x.startswith("score ↓") for x in rows) == 1 and sum(x.startswith("score ↑") for x in rows) == 1
    for r in c.paired:  # each estimate appears whole on its row
        assert f"{r.delta:.3g}" in text
    assert "↓ lower is better: A − B > 0 favours B" in text
    f = comparison_frame(c)
    assert set(f.loc[(f["metric"] == "score") & (f["variant"] == "llm-sr-tiny"), "better"]) == {"lower"}


def test_rows_without_an_interval_are_one_note_per_reason_not_rows() -> None:
    # A and B score identically on every seed, C only on seed 0: u and AUC differ by exactly 0 on
    # every seed (degenerate), C's score pairs once (no interval); only C's u / AUC rows have spread
    rows = [
        {"run_id": f"{a}{s}", "agent": a, "seed": s, "score": 1.0, "u": 0.0, "auc": 0.0}
        for a in ("A@1", "B@2")
        for s in range(3)
    ] + [
        {
            "run_id": f"C{s}",
            "agent": "C@3",
            "seed": s,
            "score": 2.0 if s == 0 else None,
            "u": 0.1 * s,
            "auc": 0.1,
        }
        for s in range(3)
    ]
    vr = VariantRuns("eplb-tiny", "h", True, pd.DataFrame(rows))
    c = compare([vr], ("A@1", "B@2", "C@3"), n_resamples=200, pairs=[("B@2", "A@1"), ("C@3", "A@1")])
    assert [(r.agent_a, r.agent_b) for r in c.paired if r.metric == "u"] == [("B@2", "A@1"), ("C@3", "A@1")]
    text = _render(comparison_rich(c, width=100), 100)
    assert "degenerate" not in text and "[0, 0]" not in text and "[-, -]" not in text
    table = [x for x in text.splitlines() if re.match(r"^(u|score|auc) [↑↓]", x)]
    assert len(table) == 1 and "C−A" in table[0]  # only C − A's u has spread (AUC: constant 0.1)
    flat = " ".join(text.split())
    assert flat.count("every seed pair gave the same difference") == 1  # said once, for all rows
    assert "B − A: u = 0, best score = 0, AUC = 0" in flat and "C − A: AUC = 0.1" in flat
    assert flat.count("a single seed pair") == 1 and "C − A: best score = 1" in flat
    assert {(g.kind, g.agent_a, g.agent_b) for g in c.aggregates if g.kind == "poi"} == {
        ("poi", "B@2", "A@1"),
        ("poi", "C@3", "A@1"),
    }  # only the pairs asked for
    assert "IQM(A) = 0" in flat and "IQM(B) = 0" in flat  # no spread: in the one aggregate note


def test_aliases_are_distinct_and_short() -> None:
    labels = tuple(f"agent{i}@abcdef" for i in range(30))
    a = aliases(labels)
    assert len(set(a.values())) == 30 and max(len(v) for v in a.values()) <= 3
    assert aliases(("x", "y")) == {"x": "A", "y": "B"}


def test_leaderboard_keeps_similar_names_apart_in_80_columns(store: Any, monkeypatch: Any) -> None:
    for s in range(2):
        store.run(
            run_id=f"p{s}", agent="pacevolve", seed=s, scores=[123.456789], family="eplb", variant="eplb-tiny"
        )
        store.run(
            run_id=f"q{s}",
            agent="pacevolve++",
            seed=s,
            scores=[98.7654321],
            family="eplb",
            variant="eplb-tiny",
        )
    buf = io.StringIO()
    monkeypatch.setattr(commands_info, "console", Console(file=buf, width=80, color_system=None))
    monkeypatch.setattr(commands_info, "default_registry", lambda: _Reg())
    assert commands_info.leaderboard("eplb-tiny", leaderboard_dir=store.leaderboards) == 0
    text = buf.getvalue()
    assert max(len(x) for x in text.splitlines()) <= 80
    names = [line.split("│")[1].strip() for line in text.splitlines() if line.startswith("│")]
    assert sorted(names) == ["pacevolve", "pacevolve++"] and "123.5" in text and "98.77" in text
    assert "higher ↑ is better" in text


class _Reg:
    def get(self, env: str) -> Any:
        return type(
            "V", (), {"id": env, "family": "eplb", "hash": "h1", "version": "1.0.0", "maximize": True}
        )()


def test_failure_counts_text() -> None:
    assert run_exec.failed_text(Counter()) == "failed 0"
    assert run_exec.failed_text(Counter({"timeout": 1, "error": 2})) == "failed 3 (error 2, timeout 1)"


def test_results_and_leaderboards_are_not_tracked() -> None:
    import subprocess

    root = Path(__file__).resolve().parents[3]
    if not (root / ".git").exists():
        return
    tracked = subprocess.run(
        ["git", "ls-files", "results", "leaderboards"], cwd=root, capture_output=True, text=True, check=True
    ).stdout
    assert tracked == ""
    ignored = subprocess.run(
        [
            "git",
            "check-ignore",
            "results/r/run.json",
            "leaderboards/eplb.parquet",
            "harness/results/store.py",
        ],
        cwd=root,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert ignored == ["results/r/run.json", "leaderboards/eplb.parquet"]
