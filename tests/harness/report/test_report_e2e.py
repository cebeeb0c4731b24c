"""compare / plot / report / leaderboard exports on real offline runs (random-search x2, pacevolve x1)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

BENCH = [sys.executable, "-m", "evobench.cli.main"]
pytestmark = pytest.mark.slow


def bench(*args: str, cwd: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([*BENCH, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    if check:
        assert p.returncode == 0, p.stdout + p.stderr
    return p


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """results/ and leaderboards/ from three small offline runs; pacevolve lacks seed 1."""
    d = tmp_path_factory.mktemp("runs")
    common = ["--env", "eplb-tiny", "--max-evaluations", "8", "--workers", "1", "--no-progress"]
    for seed in (0, 1):
        bench("run", "--agent", "random-search", "--seed", str(seed), *common, cwd=d)
    bench("run", "--agent", "pacevolve", "--model", "offline/pacevolve", "--seed", "0", *common, cwd=d)
    return d


def _run_dir(root: Path, agent: str, seed: int) -> Path:
    (d,) = [p for p in (root / "results").iterdir() if f"-{agent}-s{seed}-" in p.name]
    return d


def test_compare_lists_the_missing_seed_and_counts_it_as_zero(root: Path) -> None:
    out = json.loads(
        bench(
            "compare", "--env", "eplb-tiny", "--agents", "random-search", "pacevolve", "--json", cwd=root
        ).stdout
    )
    u = next(r for r in out["paired"] if r["metric"] == "u")
    assert u["n_seeds"] == 2 and u["n_pairs"] == 2 and u["missing_b"] == [1]
    score = next(r for r in out["paired"] if r["metric"] == "score")
    assert score["n_pairs"] == 1  # no score to pair with seed 1
    lb = pd.read_parquet(root / "leaderboards" / "eplb.parquet")
    rs = lb[lb["agent"] == "random-search"].set_index("seed")["progress"]
    pv = lb[lb["agent"] == "pacevolve"].set_index("seed")["progress"]
    assert u["delta"] == pytest.approx(((rs[0] - pv[0]) + (rs[1] - 0.0)) / 2)
    # each agent has one identity here: named by the agent alone (harness.compare.labels)
    assert any("eplb-tiny: pacevolve has no run for seed 1" in n for n in out["notes"]), out["notes"]
    assert {a["kind"] for a in out["aggregates"]} == {"iqm", "poi"}


def test_compare_table_csv_and_budget(root: Path) -> None:
    table = bench("compare", "--env", "eplb-tiny", "--agents", "random-search", "pacevolve", cwd=root).stdout
    assert "A = random-search\n" in table and "B = pacevolve\n" in table and "IQM(A)" in table
    flat = " ".join(table.split())  # notes wrap at the console's width
    assert "no run for seed 1" in flat and "u ↑" in table  # eplb: higher is better
    # one score pair (pacevolve ran seed 0 only): no interval, said once instead of a `[-, -]` row
    assert "score ↑" not in table and "a single seed pair" in flat and "best score =" in flat
    csv = bench(
        "compare",
        "--env",
        "eplb-tiny",
        "--agents",
        "random-search",
        "pacevolve",
        "--at-evaluations",
        "1",
        "--csv",
        cwd=root,
    ).stdout
    f = pd.read_csv(io.StringIO(csv), dtype={"missing_a": str, "missing_b": str})
    u = f[(f["section"] == "paired") & (f["metric"] == "u")].iloc[0]
    # After one evaluation every run holds the initial program: no difference but the missing seed's u.
    assert u["n_pairs"] == 2 and str(u["missing_b"]) == "1"


def test_compare_refuses_mixed_contents_unless_all_versions(root: Path, tmp_path: Path) -> None:
    lbdir = tmp_path / "lb"
    lbdir.mkdir()
    lb = pd.read_parquet(root / "leaderboards" / "eplb.parquet")
    old = lb.iloc[[0]].assign(run_id="old-run", env_hash="0" * 16, seed=7)
    pd.concat([lb, old]).to_parquet(lbdir / "eplb.parquet")
    args = [
        "compare",
        "--env",
        "eplb-tiny",
        "--agents",
        "random-search",
        "pacevolve",
        "--leaderboard-dir",
        str(lbdir),
    ]
    p = bench(*args, cwd=root, check=False)
    assert p.returncode == 2 and "different contents" in p.stderr
    p = bench(*args, "--all-versions", "--json", cwd=root, check=False)
    assert p.returncode == 0, p.stderr  # pooled; the old run has no candidates, so AUC is dropped with a note
    assert any("old-run: no AUC for these runs" in n for n in json.loads(p.stdout)["notes"])


def test_plots_png_and_svg(root: Path) -> None:
    bench("plot", "--env", "eplb-tiny", "--out", "curves.png", cwd=root)
    bench("plot", "--env", "eplb-tiny", "--x", "wall_s", "--metric", "u", "--out", "wall.svg", cwd=root)
    assert (root / "curves.png").read_bytes()[:4] == b"\x89PNG"
    assert b"random-search (n=2)" in (root / "wall.svg").read_bytes()  # direct label, not a legend
    assert b"(n=2)" in (root / "wall.svg").read_bytes()
    p = bench("plot", "--env", "eplb-tiny", "--x", "cost_usd", "--out", "cost.png", cwd=root, check=False)
    assert p.returncode == 2 and "no LLM cost" in p.stderr  # offline runs spend nothing


class _Checker(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.external: list[str] = []
        self.headings: list[str] = []
        self._in_h2 = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_h2 = tag == "h2"
        for k, v in attrs:
            if k in ("src", "href") and v and not v.startswith(("data:", "#")):
                self.external.append(v)
        if tag in ("script", "link", "iframe"):
            self.external.append(tag)

    def handle_data(self, data: str) -> None:
        if self._in_h2:
            self.headings.append(data)
            self._in_h2 = False


def test_run_report_is_self_contained_and_complete(root: Path) -> None:
    run = _run_dir(root, "pacevolve", 0)
    train = run / "train.parquet"
    pd.DataFrame(
        {
            "step": [0, 1, 2],
            "loss": [1.0, 0.8, 0.7],
            "kl": [0.0, 0.01, 0.02],
            "skipped": [0, 1, 0],
            "skip_reason": ["", "zero advantage", ""],
        }
    ).to_parquet(train)
    bench("report", str(run), "--out", "run.html", cwd=root)
    text = (root / "run.html").read_text()
    c = _Checker()
    c.feed(text)
    assert c.external == []
    assert c.headings == [
        "Configuration and provenance",
        "Best-so-far curves",
        "RL training diagnostics",
        "Best program vs initial program",
        "Evaluation outcomes",
        "Per-case results",
        "LLM spend by role",
    ]
    assert "offline/pacevolve" in text and "initial program" in text and text.count("<svg") >= 3
    assert "zero advantage" in text


def test_variant_report_and_leaderboard_exports(root: Path) -> None:
    bench("report", "--env", "eplb-tiny", "--out", "variant.html", cwd=root)
    text = (root / "variant.html").read_text()
    assert "What was compared" in text and "IQM(pacevolve)" in text and "<svg" in text
    md = bench("leaderboard", "--env", "eplb-tiny", "--format", "md", cwd=root).stdout
    assert md.splitlines()[1].startswith("| ---") and len(md.splitlines()) == 4
    js = json.loads(bench("leaderboard", "--env", "eplb-tiny", "--format", "json", cwd=root).stdout)
    assert {r["agent"] for r in js} == {"random-search", "pacevolve"} == {r["label"] for r in js}
    csv = pd.read_csv(
        io.StringIO(bench("leaderboard", "--env", "eplb-tiny", "--format", "csv", cwd=root).stdout)
    )
    assert csv.set_index("agent").loc["random-search", "runs"] == 2
    html = bench("leaderboard", "--env", "eplb-tiny", "--format", "html", cwd=root).stdout
    assert html.startswith("<!doctype html>") and html.count("<tr") == 3  # header + two agents
    c = _Checker()
    c.feed(html)
    assert c.external == []


def test_parquet_tables_read_without_project_code(root: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    lb = str(root / "leaderboards" / "eplb.parquet")
    rows = duckdb.sql(
        f"select agent, count(*) n, max(best_score) b from '{lb}' group by agent order by agent"
    ).fetchall()
    assert [r[:2] for r in rows] == [("pacevolve", 1), ("random-search", 2)]
    cands = str(root / "results" / "*" / "candidates.parquet")
    assert duckdb.sql(f"select count(*) from read_parquet('{cands}')").fetchall() == [(24,)]
    assert len(pd.read_parquet(_run_dir(root, "random-search", 0) / "candidates.parquet")) == 8
    assert pq.read_table(lb).num_rows == 3
    polars = pytest.importorskip("polars")
    assert polars.read_parquet(lb).height == 3


def test_compare_usage_errors(root: Path) -> None:
    p = bench(
        "compare", "--env", "eplb-tiny", "--agents", "random-search", "random-search", cwd=root, check=False
    )
    assert p.returncode == 2 and "distinct agents" in p.stderr
    p = bench(
        "compare", "--env", "eplb-tiyn", "--agents", "random-search", "pacevolve", cwd=root, check=False
    )
    assert p.returncode == 2 and "eplb-tiny" in p.stderr  # suggestion for the typo
    p = bench(
        "compare",
        "--env",
        "eplb-tiny",
        "--agents",
        "random-search",
        "pacevolve",
        "--at-evaluations",
        "3",
        "--at-cost",
        "1",
        cwd=root,
        check=False,
    )
    assert p.returncode == 2 and "at most one" in p.stderr
