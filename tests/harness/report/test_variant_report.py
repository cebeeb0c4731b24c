"""The variant report leads with what was compared, says once why a statistic has no interval."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from evobench.cli import commands_compare
from harness.envs.registry import default_registry
from harness.report.variant_report import build_variant_report

V = default_registry().get("eplb-tiny")


def _runs(store: Any) -> None:
    """random-search, pacevolve on seeds 0-2; pacevolve[islands=2] stuck at its start, no seed 2."""
    for s in range(3):
        common = dict(seed=s, family="eplb", variant="eplb-tiny", env_hash=V.hash, y_init=0.65, y_target=0.9)
        store.run(run_id=f"rs{s}", agent="random-search", scores=[0.70, 0.71 + 0.01 * s, 0.72], **common)
        store.run(run_id=f"pv{s}", agent="pacevolve", scores=[0.70, 0.73, 0.74 + 0.005 * s], **common)
        if s < 2:
            store.run(
                run_id=f"st{s}", agent="pacevolve", scores=[0.70, 0.70], config={"islands": 2}, **common
            )


def _pairs(html: str) -> list[tuple[str, str]]:
    """(A, B) of the paired table's u rows."""
    rows = re.findall(r"<tr><td>u ↑</td><td[^>]*>([^<]+)</td><td[^>]*>([^<]+)</td>", html)
    return [(a, b) for a, b in rows]


def test_without_a_baseline_the_leader_is_compared_with_each_other_identity(store: Any) -> None:
    _runs(store)
    html = build_variant_report(V, store.leaderboards, store.results, n_resamples=200).html()
    first = html.index("<h2>")
    assert html[first:].startswith("<h2>What was compared</h2>")  # the report leads with it
    lead = re.search(r"the leader by mean progress u, (pacevolve\[[^\]]+\]), is compared", html)
    assert lead is not None
    leader = lead.group(1)
    # two pairs (each other identity against the leader), not all three pairs of three identities
    assert len(_pairs(html)) <= 2 and all(b == leader for _, b in _pairs(html))
    assert "degenerate" not in html and "[–, –]" not in html and "[0, 0]" not in html
    assert html.count("has no run for seed 2") == 1  # the padded seed: one note, not one per pair
    assert html.count("class='note'>a seed one side of a pair") == 1
    # the leaderboard has a handful of columns, not the 17 of `bench leaderboard`
    board = html[html.index("<h2>Leaderboard</h2>") :]
    head = board[: board.index("</thead>")]
    assert head.count("<th>") <= 9 and "score mean ± s.e.m." in head


def test_a_baseline_is_compared_with_each_other_unit_and_markdown_matches(store: Any, tmp_path: Path) -> None:
    _runs(store)
    out = tmp_path / "out" / "report.md"
    rc = commands_compare.report(
        env="eplb-tiny",
        out=out,
        baseline="random-search",
        leaderboard_dir=store.leaderboards,
        results_dir=store.results,
    )
    assert rc == 0
    md = out.read_text()
    assert md.index("## What was compared") < md.index("## Leaderboard")
    base = re.search(r"Baseline (random-search\S*) \(3 seeds\) against (.+), seed by seed", md)
    assert base is not None and base.group(2).count("pacevolve[") == 2
    rows = [ln for ln in md.splitlines() if ln.startswith("| u ↑ |")]
    assert rows and all(ln.split(" | ")[2] == base.group(1) for ln in rows)  # B is always the baseline
    figs = re.findall(r"!\[[^\]]*\]\((report-fig\d\.svg)\)", md)
    assert figs == ["report-fig1.svg", "report-fig2.svg"]
    assert all((out.parent / f).read_text().lstrip().startswith("<?xml") for f in figs)
    assert "degenerate" not in md and "> **Note:** a seed one side of a pair" in md


def test_the_agents_asked_for_are_the_ones_compared(store: Any, tmp_path: Path) -> None:
    _runs(store)
    out = tmp_path / "r.html"
    args = dict(env="eplb-tiny", leaderboard_dir=store.leaderboards, results_dir=store.results)
    assert (
        commands_compare.report(out=out, agents=("random-search=RS", "pacevolve=PV"), pool=True, **args) == 0
    )
    html = out.read_text()
    assert set(_pairs(html)) == {("RS", "PV")}  # A, B in the order given
    assert "RS (3 seeds)" in html and "No baseline given" not in html
    assert (
        commands_compare.report(
            out=out, agents=("random-search=RS", "pacevolve=PV"), baseline="XX", pool=True, **args
        )
        == 2
    )
    assert commands_compare.report(out=tmp_path / "r.pdf", **args) == 2
    assert commands_compare.report(run_dir=tmp_path, baseline="RS") == 2  # a run report compares nothing


def test_compare_with_a_baseline_puts_it_on_the_b_side(store: Any, capsys: Any) -> None:
    import json

    _runs(store)
    args: dict[str, Any] = dict(
        env=("eplb-tiny",),
        agents=("random-search=RS", "pacevolve=PV"),
        pool=True,
        leaderboard_dir=store.leaderboards,
        results_dir=store.results,
        resamples=200,
        json_out=True,
    )
    assert commands_compare.compare(baseline="random-search", **args) == 0
    out = json.loads(capsys.readouterr().out)
    assert {(r["agent_a"], r["agent_b"]) for r in out["paired"]} == {("PV", "RS")}  # listed first, still B
    assert commands_compare.compare(baseline="nobody", **args) == 2
    assert "none of the --agents entries" in capsys.readouterr().err
