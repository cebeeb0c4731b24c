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
            "score": 100.123456 * k + s,
            "u": 0.1 * k + 0.01 * s,
            "auc": 0.05 * k,
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
    assert run_exec._failed_text(Counter()) == "failed 0"
    assert run_exec._failed_text(Counter({"timeout": 1, "error": 2})) == "failed 3 (error 2, timeout 1)"


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
