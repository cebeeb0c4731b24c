"""``bench report --env E``: one self-contained HTML page comparing the agents run on a variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.compare.identity import IDENTITY_COLUMN, with_identity
from harness.compare.paired import compare
from harness.compare.select import agent_curves, identity_units, variant_runs
from harness.envs.registry import Variant
from harness.results.leaderboard import load_leaderboard, summarize

from . import page
from .plot import curves_figure


def build_variant_report(
    variant: Variant,
    leaderboard_dir: Path,
    results_dir: Path,
    *,
    all_versions: bool = False,
    n_resamples: int = 4000,
    key: str | None = None,
) -> str:
    """Render the report of every agent's runs on one variant.

    Args:
        variant: The resolved variant.
        leaderboard_dir: Directory of the leaderboard tables.
        results_dir: Directory holding the run directories.
        all_versions: Pool runs scored on different contents.
        n_resamples: Bootstrap resamples of the comparison.
        key: Only runs scored on this held-out key (runs of different keys are never pooled).

    Returns:
        The HTML document.

    Raises:
        VersionMixError: If runs span several contents and ``all_versions`` is off, or several
            held-out keys (``KeyMixError``).
        ValueError: If the variant has no finished runs.
    """
    lb = with_identity(load_leaderboard(leaderboard_dir, variant.family))
    lb = lb[lb["variant"] == variant.id]
    if lb.empty:
        raise ValueError(f"no finished runs of {variant.id} in {leaderboard_dir}")
    # every identity (agent, configuration, models, budget) is its own unit, named by what differs
    # (harness.compare.labels); nothing is pooled
    units = identity_units(lb)
    agents = tuple(units)
    label_of = {ident: label for label, (ident,) in units.items()}
    common: dict[str, Any] = dict(
        variant=variant.id,
        current_hash=variant.hash,
        maximize=variant.maximize,
        results_dir=results_dir,
        all_versions=all_versions,
        key=key,
    )
    curves, notes, bounds = agent_curves(lb, units=units, progress=variant.progress, **common)
    sections: list[tuple[str, str]] = []
    s = summarize(lb if all_versions else lb[lb["env_hash"] == lb["env_hash"].mode().iloc[0]], variant.id)
    s["identity"] = s["identity"].map(label_of)
    sections.append(("Leaderboard", page.table(list(s.columns), s.itertuples(index=False))))
    if len(agents) >= 2:
        vr = variant_runs(lb, progress=variant.progress, units=units, **common)
        c = compare([vr], agents, n_resamples=n_resamples)
        rows = [
            (
                f"{r.metric} {'↑' if r.maximize else '↓'}",
                r.agent_a,
                r.agent_b,
                f"{r.n_pairs}/{r.n_seeds}",
                _g(r.mean_a),
                _g(r.mean_b),
                _g(r.delta),
                f"[{_g(r.ci_lo)}, {_g(r.ci_hi)}] {r.ci_method}",
                _g(r.p_value),
                _g(r.p_holm),
                "; ".join(
                    f"{w} seed {' '.join(map(str, m))}"
                    for w, m in ((r.agent_a, r.missing_a), (r.agent_b, r.missing_b))
                    if m
                ),
            )
            for r in c.paired
        ]
        head = ["metric", "A", "B", "pairs", "mean A", "mean B", "A − B", "95 % CI", "p", "p Holm", "missing"]
        agg = [
            (
                f"IQM({g.agent_a})" if g.kind == "iqm" else f"P({g.agent_a} > {g.agent_b})",
                _g(g.estimate),
                f"[{_g(g.ci_lo)}, {_g(g.ci_hi)}]",
                g.n_runs,
            )
            for g in c.aggregates
        ]
        sections.append(
            (
                "Paired comparison (A − B, by seed)",
                page.table(head, rows)
                + page.table(["statistic of u", "estimate", "95 % stratified bootstrap CI", "runs"], agg)
                + "".join(f"<p class='note'>{page.esc(n)}</p>" for n in c.notes),
            )
        )
    figs = ""
    if curves:
        figs = page.figures(
            [
                page.figure(
                    curves_figure(curves, axis="evaluations", title=f"{variant.id}: best score so far")
                ),
                page.figure(
                    curves_figure(
                        curves,
                        metric="u",
                        y_floor=bounds[0] if bounds else None,
                        y_target=bounds[1] if bounds else None,
                        title=f"{variant.id}: normalised progress u",
                    )
                ),
            ]
        )
    sections.append(
        (
            "Best-so-far curves (mean across seeds, 95 % bootstrap band)",
            figs or "<p>No candidates to plot.</p>",
        )
    )
    runs = lb.assign(**{IDENTITY_COLUMN: lb[IDENTITY_COLUMN].map(label_of)}).sort_values(
        [IDENTITY_COLUMN, "seed"]
    )[
        [
            "run_id",
            IDENTITY_COLUMN,
            "seed",
            "best_score",
            "progress",
            "n_evaluations",
            "n_ok",
            "env_hash",
            "cost_usd",
        ]
    ]
    sections.append(("Runs", page.table(list(runs.columns), runs.itertuples(index=False))))
    if notes:
        sections.append(("Notes", "".join(f"<p class='note'>{page.esc(n)}</p>" for n in notes)))
    better = "higher" if variant.maximize else "lower"
    sub = f"{variant.id} v{variant.version} ({variant.hash}); {better} score is better; {len(lb)} runs"
    return page.page(f"evobench variant {variant.id}", sub, sections)


def _g(x: float) -> str:
    return "–" if x != x else f"{x:.3g}"
