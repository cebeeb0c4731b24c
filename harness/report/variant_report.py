"""``bench report --env E``: one report comparing the agents run on a variant (HTML or Markdown).

It leads with what was compared: a baseline against each other unit (``--baseline``), the units
asked for (``--agents``; every pair of them), or, given neither, the leader by mean progress
against each other identity; never every pair of every identity that happens to have runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from harness.compare.identity import IDENTITY_COLUMN, with_identity
from harness.compare.paired import Comparison, baseline_pairs, compare
from harness.compare.select import agent_curves, identity_units, variant_runs
from harness.compare.tables import aggregate_name, split_aggregates, split_intervals
from harness.envs.registry import Variant
from harness.results.leaderboard import load_leaderboard, summarize

from .axes import score_axis, y_init_of
from .document import Block, Document, Figures, Para, Table, notes
from .plot import curves_figure, legend_label


def build_variant_report(
    variant: Variant,
    leaderboard_dir: Path,
    results_dir: Path,
    *,
    all_versions: bool = False,
    n_resamples: int = 4000,
    key: str | None = None,
    units: Mapping[str, tuple[str, ...]] | None = None,
    baseline: str | None = None,
) -> Document:
    """Build the report of the agents' runs on one variant.

    Args:
        variant: The resolved variant.
        leaderboard_dir: Directory of the leaderboard tables.
        results_dir: Directory holding the run directories.
        all_versions: Pool runs scored on different contents.
        n_resamples: Bootstrap resamples of the comparison.
        key: Only runs scored on this held-out key (runs of different keys are never pooled).
        units: Label -> identities of each compared unit (``--agents``); None: every identity.
        baseline: Label of the unit every other is compared with; None: with ``units``, every
            pair of them; without, the leader by mean progress.

    Returns:
        The document (``.html()`` or ``.write_markdown(path)``).

    Raises:
        VersionMixError: If runs span several contents and ``all_versions`` is off, or several
            held-out keys (``KeyMixError``).
        ValueError: If the variant has no finished runs, or ``baseline`` is not a unit.
    """
    lb = with_identity(load_leaderboard(leaderboard_dir, variant.family))
    lb = lb[lb["variant"] == variant.id]
    if lb.empty:
        raise ValueError(f"no finished runs of {variant.id} in {leaderboard_dir}")
    chosen = units is not None
    # every identity (agent, configuration, models, budget) is its own unit, named by what differs
    # between them (harness.compare.labels); nothing is pooled
    named = identity_units(lb)
    label_of = {ident: label for label, idents in named.items() for ident in idents}
    if units is None:
        units = named
    units = dict(units)
    if not chosen and baseline is not None:
        baseline = label_of.get(baseline, baseline)  # an identity names its readable unit
    if baseline is not None and baseline not in units:
        raise ValueError(f"--baseline {baseline!r} is none of the compared units {list(units)}")
    lb_units = lb[lb[IDENTITY_COLUMN].astype(str).isin({i for ids in units.values() for i in ids})]
    common: dict[str, Any] = dict(
        variant=variant.id,
        current_hash=variant.hash,
        maximize=variant.maximize,
        results_dir=results_dir,
        all_versions=all_versions,
        key=key,
    )
    curves, curve_notes, bounds = agent_curves(lb_units, units=units, progress=variant.progress, **common)
    doc = Document(f"evobench variant {variant.id}", "")
    labels = tuple(units)
    if len(labels) >= 2:
        vr = variant_runs(lb_units, progress=variant.progress, units=units, **common)
        lead: list[Block] = []
        if baseline is None and not chosen:
            means = vr.runs.groupby("agent")["u"].mean()
            baseline = str(means.idxmax()) if len(labels) > 2 and not means.empty else None
            if baseline is not None:
                why = f"No baseline given: the leader by mean progress u, {legend_label(baseline)}, is "
                why += "compared with each other identity (choose with --baseline NAME, or --agents A B ...)."
                lead.append(Para(why))
        pairs = baseline_pairs(baseline, labels) if baseline is not None else None
        c = compare([vr], labels, n_resamples=n_resamples, pairs=pairs)
        doc.sections.append(("What was compared", lead + _comparison_blocks(c, vr.runs, baseline)))
    doc.sections.append(
        ("Leaderboard", [_leaderboard(lb_units if chosen else lb, variant, all_versions, label_of)])
    )
    figs: list[Figure] = []
    if curves:
        sax = score_axis(variant)
        y_init = y_init_of(*bounds, variant.progress.headroom) if bounds else None
        floor, target = bounds if bounds else (None, None)
        metrics = [("score", "best score so far")] + ([("u", "normalised progress u")] if bounds else [])
        draw = partial(curves_figure, curves, score=sax, y_init=y_init, y_floor=floor, y_target=target)
        figs = [draw(metric=metric, title=f"{variant.id}: {what}") for metric, what in metrics]
    doc.sections.append(
        (
            "Best-so-far curves (mean across seeds, 95 % bootstrap band)",
            [Figures(tuple(figs))] if figs else [Para("No candidates to plot.")],
        )
    )
    runs = (lb_units if chosen else lb).sort_values([IDENTITY_COLUMN, "seed"])
    cols = ["run_id", IDENTITY_COLUMN, "seed", "best_score", "progress", "n_evaluations", "n_ok", "cost_usd"]
    runs = runs[cols].assign(
        **{IDENTITY_COLUMN: runs[IDENTITY_COLUMN].astype(str).map(lambda i: label_of.get(i, i))}
    )
    doc.sections.append(("Runs", [Table(tuple(cols), list(runs.itertuples(index=False)))]))
    if curve_notes:
        doc.sections.append(("Notes", notes(curve_notes)))
    better = "higher" if variant.maximize else "lower"
    doc.subtitle = f"{variant.id} v{variant.version} ({variant.hash}); {better} score is better; "
    doc.subtitle += f"{len(lb)} runs"
    return doc


def _comparison_blocks(c: Comparison, runs: pd.DataFrame, baseline: str | None) -> list[Block]:
    """The lead: who was compared with whom, the paired table, the aggregates and the notes."""
    seeds = runs.groupby("agent")["seed"].nunique()
    n = {a: int(seeds.get(a, 0)) for a in c.agents}
    if baseline is not None:
        others = ", ".join(f"{legend_label(a)} ({n[a]} seeds)" for a in c.agents if a != baseline)
        what = f"Baseline {legend_label(baseline)} ({n[baseline]} seeds) against {others}, seed by seed."
    else:
        named = [f"{legend_label(a)} ({n[a]} seeds)" for a in c.agents]
        what = " against ".join(named) if len(named) == 2 else "Every pair of " + ", ".join(named)
        what += ", seed by seed."
    out: list[Block] = [
        Para(
            f"{what} Each row is A − B ({c.budget}), the mean over seeds of A's value minus B's; "
            "↑: higher is better (A − B > 0 favours A), ↓: lower is better (A − B > 0 favours B). "
            f"{c.level:.0%} bootstrap CI; permutation p, Holm-adjusted over the rows' tests."
        )
    ]
    shown, no_ci = split_intervals(c.paired, legend_label)
    if shown:
        head = ("metric", "A", "B", "pairs", "mean A", "mean B", "A − B", f"{c.level:.0%} CI", "p", "p Holm")
        rows = [
            (
                f"{r.metric} {'↑' if r.maximize else '↓'}",
                legend_label(r.agent_a),
                legend_label(r.agent_b),
                f"{r.n_pairs}/{r.n_seeds}",
                _g(r.mean_a),
                _g(r.mean_b),
                _g(r.delta),
                f"[{_g(r.ci_lo)}, {_g(r.ci_hi)}] {r.ci_method}",
                _g(r.p_value),
                _g(r.p_holm),
            )
            for r in shown
        ]
        out.append(Table(head, rows))
    aggregates, flat = split_aggregates(c.aggregates, legend_label)
    if aggregates:
        agg = [
            (aggregate_name(g, legend_label), _g(g.estimate), f"[{_g(g.ci_lo)}, {_g(g.ci_hi)}]", g.n_runs)
            for g in aggregates
        ]
        out.append(Table(("statistic of u", "estimate", "95 % stratified bootstrap CI", "runs"), agg))
    return out + notes([*no_ci, *([flat] if flat else []), *c.notes])


def _leaderboard(lb: pd.DataFrame, variant: Variant, all_versions: bool, label_of: dict[str, str]) -> Table:
    """Per identity: runs, seeds, best, mean ± s.e.m. of score and u, spend (fits the page)."""
    s = summarize(lb if all_versions else lb[lb["env_hash"] == lb["env_hash"].mode().iloc[0]], variant.id)
    rows = [
        (
            label_of.get(str(r["identity"]), str(r["identity"])),
            *([str(r["device"]) or "–"] if s["device"].astype(str).ne("").any() else []),
            int(r["runs"]),
            int(r["seeds"]),
            int(r["scored"]),
            r["best"],
            f"{_g(r['score_mean'], 4)} ± {_g(r['score_sem'], 2)}",
            f"{_g(r['progress_mean'], 3)} ± {_g(r['progress_sem'], 2)}",
            r["cost_usd"],
        )
        for _, r in s.iterrows()
    ]
    device = ("device",) if s["device"].astype(str).ne("").any() else ()
    head = ("identity", *device, "runs", "seeds", "scored", "best", "score mean ± s.e.m.", "u mean ± s.e.m.")
    return Table((*head, "LLM cost (USD)"), rows)


def _g(x: float, digits: int = 3) -> str:
    return "–" if x != x else f"{x:.{digits}g}"
