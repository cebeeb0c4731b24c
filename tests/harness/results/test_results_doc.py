"""``docs/results.md`` is true: its tables name every column, and its queries run on a real run's files.

The code blocks are taken from the document itself and run as written (from the directory holding
``results/`` and ``leaderboards/``), with pandas, polars and DuckDB, on two real runs of the cheapest
variant (selftest-tiny): random search, and a scripted agent whose candidates fail in two ways.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pandas as pd
import pytest
from pydantic import BaseModel

from agents.base import Agent, AgentContext, Proposal
from agents.random_search import RandomSearchAgent, RandomSearchConfig
from harness.envs.registry import default_registry
from harness.evaluation.result import program_sha256
from harness.results.candidates import candidates_schema
from harness.results.leaderboard import load_leaderboard
from harness.results.records import LeaderboardRow, arrow_schema
from harness.results.store import RunStore
from harness.runner.context import Budget
from harness.runner.runner import create_run, drive
from harness.sandbox.factory import make_backend

DOC = Path(__file__).resolve().parents[3] / "docs" / "results.md"
VARIANT = "selftest-tiny"


class _Cfg(BaseModel):
    pass


class _Scripted(Agent):
    """Proposes a fixed list: a better-named answer, a program that raises, one that breaks the rule."""

    name: ClassVar[str] = "scripted"
    Config: ClassVar[type[BaseModel]] = _Cfg
    sources: ClassVar[tuple[str, ...]] = (
        "def probe():\n    return {'answer': 7.0}\n",
        "def probe():\n    raise ValueError('scripted failure')\n",
        "def probe():\n    return [1]\n",
        "def probe():\n    return {'answer': 8.0}\n",
    )

    def run(self, ctx: AgentContext) -> None:
        ctx.evaluate([Proposal(source=s, iteration=i) for i, s in enumerate(self.sources)])


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory holding ``results/`` and ``leaderboards/`` of two finished runs."""
    root = tmp_path_factory.mktemp("doc")
    v = default_registry().get(VARIANT)
    with make_backend("local", workers=1, mode="warm", prewarm=(VARIANT,)) as backend:
        for agent in (RandomSearchAgent(RandomSearchConfig()), _Scripted()):
            store = create_run(results_dir=root / "results", variant=v, agent=agent, seed=1,
                               budget=Budget(max_evaluations=4), backend="local", workers=1)  # fmt: skip
            try:
                drive(store, variant=v, agent=agent, backend=backend, leaderboard_dir=root / "leaderboards")
            finally:
                store.close()
    yield root


def _blocks(section: str) -> list[str]:
    """The ``python`` code blocks of one ``###`` section of the document (all of it for ``""``)."""
    text = DOC.read_text(encoding="utf-8")
    if section:
        text = text.split(f"\n### {section}\n", 1)[1].split("\n### ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def _frame(x: Any) -> pd.DataFrame:
    return x.to_pandas() if hasattr(x, "to_pandas") else pd.DataFrame(x)


def test_every_column_is_documented_with_its_type() -> None:
    text = DOC.read_text(encoding="utf-8")
    for f in candidates_schema(["m"]):
        typ = {"metrics": "struct<", "cases": "list<struct<name: string"}.get(f.name, f"{f.type}`")
        assert f"| `{f.name}` | `{typ}" in text, f.name
    for f in arrow_schema(LeaderboardRow):
        assert f"| `{f.name}` | `{f.type}` |" in text, f.name
    assert "schema version is **2**" in text


@pytest.mark.parametrize("library", ["pandas", "polars", "DuckDB"])
def test_the_documented_queries_answer_on_a_real_run(
    root: Path, library: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(root)
    ns: dict[str, Any] = {}
    blocks = _blocks(library)
    assert len(blocks) == 4
    for i, code in enumerate(blocks):
        exec(compile(code, f"{DOC}:{library}:{i}", "exec"), ns)
    best, curve, reasons = (_frame(ns[k]) for k in ("best", "curve", "reasons"))
    stores = [RunStore.open(d, readonly=True) for d in sorted((root / "results").iterdir())]
    truth = {s.info.agent: s.rows() for s in stores}
    # (1) one row per agent: its best full score, the text of a program that scored it
    assert sorted(best["agent"]) == ["random-search", "scripted"]
    for _, b in best.iterrows():
        ok = [r for r in truth[b["agent"]] if r.status == "ok"]
        top = max(r.score for r in ok if r.score is not None)
        first = min((r for r in ok if r.score == top), key=lambda r: r.seq)
        assert b["score"] == top and b["seq"] == first.seq
        assert program_sha256(b["source"]) == first.program_sha256
    # (2) per run: evaluations 1..n, best so far never falls, and ends at the leaderboard's best
    lb = load_leaderboard(root / "leaderboards", "selftest").set_index("run_id")
    for run_id, g in curve.groupby("run_id"):
        assert g["evaluations"].tolist() == list(range(1, len(g) + 1)) == list(range(1, 5))
        values = g["best_so_far"].to_numpy(dtype=float)
        assert np.all(np.diff(values[~np.isnan(values)]) >= 0) and values[-1] == lb.loc[run_id, "best_score"]
    # (3) the scripted failures, counted once each; the counts cover every failed evaluation
    failed = [r for rows in truth.values() for r in rows if r.status != "ok"]
    assert int(reasons["n"].sum()) == len(failed) >= 2
    scripted = reasons[reasons["agent"] == "scripted"]
    assert sorted(scripted["status"]) == ["error", "invalid"] and scripted["n"].tolist() == [1, 1]
    assert scripted["reason"].str.contains("scripted failure").any()


def test_the_other_documented_snippets_run(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    head = DOC.read_text(encoding="utf-8").split("\n## Queries\n", 1)[0]
    blocks = re.findall(r"^```python\n(.*?)^```", head, re.S | re.M)
    assert len(blocks) == 2
    ns: dict[str, Any] = {}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{DOC}:snippet:{i}", "exec"), ns)
    assert ns["version"] == 2 and set(ns["docs"]) == set(candidates_schema(["m"]).names)
    lb = ns["lb"]
    assert len(lb) == 2 and all(
        program_sha256(s) == h for s, h in zip(lb["source"], lb["best_program_sha"], strict=True)
    )
