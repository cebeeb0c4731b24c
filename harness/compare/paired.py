"""Seed-paired comparisons of agents per variant, Holm-corrected, plus aggregates across variants."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from .select import VariantRuns
from .stats import holm, mean_ci, probability_of_improvement, sign_flip_pvalue, stratified_iqm

METRICS = ("u", "score", "auc")
"""Metrics compared per variant: normalised progress, raw best score, area under the progress curve."""
SMALL_N = 10
"""Below this many pairs the output warns that bootstrap intervals undercover."""


@dataclass
class PairedRow:
    """Agent A minus agent B on one variant and one metric, paired by seed."""

    variant: str
    """Variant id."""
    metric: str
    """``u``, ``score`` or ``auc`` (:data:`METRICS`)."""
    agent_a: str
    """Label of A (``<agent>@<cfg>`` or the ``=LABEL`` given)."""
    agent_b: str
    """Label of B."""
    n_seeds: int
    """Seeds run by A or B."""
    n_pairs: int
    """Pairs that entered the statistics (for ``score``: seeds both scored)."""
    missing_a: list[int]
    """Seeds B ran and A did not (counted as u = 0 / AUC = 0; no score pair)."""
    missing_b: list[int]
    """Seeds A ran and B did not."""
    mean_a: float
    """Mean of A's values over the pair's seeds (NaN when none)."""
    mean_b: float
    """Mean of B's values over the pair's seeds."""
    delta: float
    """Mean of the per-seed differences A - B (NaN without pairs)."""
    ci_lo: float
    """Lower bound of the bootstrap CI of ``delta``."""
    ci_hi: float
    """Upper bound of the bootstrap CI of ``delta``."""
    ci_method: str
    """How the CI was formed (``BCa``, ``percentile``, ``degenerate``, ``none``)."""
    p_value: float
    """Two-sided paired permutation p-value (NaN without pairs)."""
    p_holm: float = math.nan
    """Holm-adjusted p-value over all variants and pairs compared on this metric."""
    maximize: bool = True
    """Direction of the metric: u and AUC are always higher-is-better, a raw score may not be."""


@dataclass
class AggregateRow:
    """An aggregate over variants: IQM of one agent's u, or A's probability of improving on B."""

    kind: str
    """``iqm`` or ``poi``."""
    agent_a: str
    """Label of the agent (IQM) or of A (probability of improvement)."""
    agent_b: str
    """Label of B; empty for ``iqm``."""
    estimate: float
    """The statistic on the observed runs."""
    ci_lo: float
    """Lower bound of the stratified bootstrap CI."""
    ci_hi: float
    """Upper bound of the stratified bootstrap CI."""
    n_runs: int
    """Runs (IQM) or run values of both agents (P, seed gaps of the pair counted as u = 0) used."""
    n_variants: int
    """Variants the statistic spans."""


@dataclass
class Comparison:
    """Everything ``bench compare`` reports."""

    agents: tuple[str, ...]
    """Unit labels, in the order given."""
    budget: str
    """Where the runs were compared (``final`` or ``at ...``)."""
    level: float
    """Confidence level."""
    paired: list[PairedRow] = field(default_factory=list)
    aggregates: list[AggregateRow] = field(default_factory=list)
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Per-run values used (with a ``variant`` column); missing runs are listed in the paired rows."""
    notes: list[str] = field(default_factory=list)
    """Things the reader must know (missing seeds, left-out agents, duplicates)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (NaN becomes None)."""

        def clean(x: Any) -> Any:
            if isinstance(x, float) and not math.isfinite(x):
                return None
            if isinstance(x, dict):
                return {k: clean(v) for k, v in x.items()}
            if isinstance(x, list):
                return [clean(v) for v in x]
            if isinstance(x, np.integer):
                return int(x)
            if isinstance(x, np.floating):
                return clean(float(x))
            return x

        runs = self.runs.astype(object).where(self.runs.notna(), None).to_dict(orient="records")
        return clean(
            {
                "agents": list(self.agents),
                "budget": self.budget,
                "level": self.level,
                "paired": [asdict(r) for r in self.paired],
                "aggregates": [asdict(r) for r in self.aggregates],
                "runs": runs,
                "notes": self.notes,
            }
        )


def _pair_frame(
    runs: pd.DataFrame, a: str, b: str, metric: str
) -> tuple[list[int], list[int], list[int], np.ndarray, np.ndarray]:
    """Seeds of A or B, the seeds each lacks, and both metric vectors over those seeds.

    A seed one of the two ran and the other did not counts as u = 0 / AUC = 0 for the other (it
    had its chance and produced nothing) and gives no score pair. Only the pair's own seeds count,
    so no other agent can change the figures.
    """
    ra = runs[runs["agent"] == a].set_index("seed")[metric]
    rb = runs[runs["agent"] == b].set_index("seed")[metric]
    seeds = sorted(set(ra.index) | set(rb.index))
    missing_a = [s for s in seeds if s not in ra.index]
    missing_b = [s for s in seeds if s not in rb.index]
    fill = math.nan if metric == "score" else 0.0
    xa = ra.reindex(seeds).to_numpy(dtype=np.float64, copy=True)
    xb = rb.reindex(seeds).to_numpy(dtype=np.float64, copy=True)
    xa[np.isin(seeds, missing_a)] = fill
    xb[np.isin(seeds, missing_b)] = fill
    return seeds, missing_a, missing_b, xa, xb


def _pair(
    vr: VariantRuns, a: str, b: str, metric: str, level: float, n_resamples: int, seed: int
) -> PairedRow:
    seeds, missing_a, missing_b, xa, xb = _pair_frame(vr.runs, a, b, metric)
    both = ~np.isnan(xa) & ~np.isnan(xb)  # score: seeds both runs scored; AUC: runs that have a curve
    d = xa[both] - xb[both]
    if d.size:
        ci = mean_ci(d, level=level, n_resamples=n_resamples, seed=seed)
        p = sign_flip_pvalue(d, seed=seed)
    else:
        ci, p = None, math.nan
    return PairedRow(
        variant=vr.variant,
        metric=metric,
        agent_a=a,
        agent_b=b,
        n_seeds=len(seeds),
        n_pairs=int(d.size),
        missing_a=missing_a,
        missing_b=missing_b,
        mean_a=float(np.nanmean(xa)) if np.any(~np.isnan(xa)) else math.nan,
        mean_b=float(np.nanmean(xb)) if np.any(~np.isnan(xb)) else math.nan,
        delta=ci.estimate if ci else math.nan,
        ci_lo=ci.lo if ci else math.nan,
        ci_hi=ci.hi if ci else math.nan,
        ci_method=ci.method if ci else "none",
        p_value=p,
        maximize=vr.maximize if metric == "score" else True,
    )


def baseline_pairs(baseline: str, agents: Sequence[str]) -> list[tuple[str, str]]:
    """Each other agent against ``baseline``: pairs ``(other, baseline)``, so A − B > 0 favours the other.

    Raises:
        ValueError: If ``baseline`` is not among ``agents``.
    """
    if baseline not in agents:
        raise ValueError(f"baseline {baseline!r} is not among the compared agents {list(agents)}")
    return [(a, baseline) for a in agents if a != baseline]


def compare(
    variants: list[VariantRuns],
    agents: tuple[str, ...],
    *,
    budget: str = "final",
    level: float = 0.95,
    n_resamples: int = 4000,
    seed: int = 0,
    pairs: Sequence[tuple[str, str]] | None = None,
) -> Comparison:
    """Compare the pairs of ``agents`` asked for (default: every pair, A listed before B) per variant.

    Per variant and metric: mean paired difference A - B with a bootstrap CI and a sign-flip
    permutation p-value; p-values are Holm-adjusted per metric over all (variant, pair) tests.
    Within a pair, a seed one ran and the other did not counts as u = 0 and AUC = 0 for the other
    and gives no score pair (listed). An agent with no runs on a variant is listed and left out of
    that variant. Across variants: IQM of each agent's own runs' u over the variants it ran, and
    the probability of improvement per pair over the variants both ran, with stratified bootstrap
    CIs. Nothing but a p_holm depends on which other agents are listed (Holm adjusts over every
    test made, so adding agents can only raise it).

    Args:
        variants: Per-variant runs (:func:`~harness.compare.select.variant_runs`).
        agents: At least two distinct unit labels.
        budget: Label of where the runs were compared.
        level: Confidence level.
        n_resamples: Bootstrap resamples.
        seed: Seed of all resampling.
        pairs: The ``(A, B)`` pairs to test (e.g. :func:`baseline_pairs`); None: every pair.
            Holm adjusts over the tests made, so fewer pairs give smaller adjusted p-values.

    Returns:
        The comparison.

    Raises:
        ValueError: If fewer than two distinct agents are given, or a pair names an agent not
            among them (or the same agent twice).
    """
    if len(set(agents)) < 2 or len(set(agents)) != len(agents):
        raise ValueError(f"need at least two distinct agents, got {list(agents)}")
    chosen = list(combinations(agents, 2)) if pairs is None else list(dict.fromkeys(pairs))
    for a, b in chosen:
        if a == b or a not in agents or b not in agents:
            raise ValueError(f"pair ({a}, {b}) is not two distinct agents of {list(agents)}")
    out = Comparison(agents=agents, budget=budget, level=level)
    # (variant, agent, its missing seeds) -> the agents it was paired with: one note for them all
    padded: dict[tuple[str, str, tuple[int, ...]], list[str]] = {}
    fulls = []
    for vr in variants:
        out.notes.extend(vr.notes)
        runs = vr.runs
        have = [a for a in agents if (runs["agent"] == a).any()]
        for a in agents:
            if a not in have:
                out.notes.append(f"{vr.variant}: no runs of {a}: left out of this variant")
        metrics = [m for m in METRICS if m != "auc" or runs["auc"].notna().any()]
        for a, b in ((a, b) for a, b in chosen if a in have and b in have):
            for metric in metrics:
                out.paired.append(_pair(vr, a, b, metric, level, n_resamples, seed))
            row = out.paired[-len(metrics)] if metrics else None
            if row is not None:
                for who, other, seeds in ((a, b, row.missing_a), (b, a, row.missing_b)):
                    if seeds:
                        padded.setdefault((vr.variant, who, tuple(seeds)), []).append(other)
        full = runs.copy()
        full.insert(0, "variant", vr.variant)
        fulls.append(full.sort_values(["agent", "seed"], ignore_index=True))
    if padded:
        out.notes.append(padded_note(padded))
    few = sorted({r.n_pairs for r in out.paired if 0 < r.n_pairs < SMALL_N})
    if few:
        out.notes.append(
            f"only {'/'.join(map(str, few))} seed pairs: bootstrap CIs from so few pairs are too narrow; "
            "trust the permutation p (its smallest possible value with n pairs is 2/2^n, "
            f"{2 / 2 ** few[0]:.3g} for n={few[0]})"
        )
    for metric in METRICS:
        rows = [r for r in out.paired if r.metric == metric]
        for r, p in zip(rows, holm([r.p_value for r in rows]), strict=True):
            r.p_holm = p
    out.runs = pd.concat(fulls, ignore_index=True) if fulls else pd.DataFrame()
    _aggregate(out, variants, agents, chosen, level, n_resamples, seed)
    return out


def padded_note(padded: dict[tuple[str, str, tuple[int, ...]], list[str]]) -> str:
    """One note for every seed counted as u = 0 because one side of a pair did not run it.

    Args:
        padded: ``(variant, agent, seeds it lacks)`` -> the agents it was paired with there.
    """
    parts = [
        f"{variant}: {who} has no run for seed {' '.join(map(str, seeds))} (vs {', '.join(others)})"
        for (variant, who, seeds), others in padded.items()
    ]
    return (
        "a seed one side of a pair did not run counts as u = 0 and AUC = 0 for that side (no score pair): "
        + "; ".join(parts)
    )


def _aggregate(
    out: Comparison,
    variants: list[VariantRuns],
    agents: tuple[str, ...],
    pairs: list[tuple[str, str]],
    level: float,
    n_resamples: int,
    seed: int,
) -> None:
    """IQM of u per agent over the variants it ran; P(A > B) per pair over the variants both ran."""
    ran = {a: [vr for vr in variants if (vr.runs["agent"] == a).any()] for a in agents}
    for a in agents:
        if not ran[a]:
            continue
        u = {vr.variant: vr.runs.loc[vr.runs["agent"] == a, "u"].to_numpy() for vr in ran[a]}
        ci = stratified_iqm(u, level=level, n_resamples=n_resamples, seed=seed)
        n = sum(v.size for v in u.values())
        out.aggregates.append(AggregateRow("iqm", a, "", ci.estimate, ci.lo, ci.hi, n, len(u)))
        if len(u) < len(variants):
            out.notes.append(f"IQM({a}) is over the {len(u)} of {len(variants)} variants it ran")
    for a, b in pairs:
        both = [vr for vr in ran[a] if vr in ran[b]]
        if not both:
            out.notes.append(f"P({a} > {b}): no variant both ran")
            continue
        ua: dict[str, np.ndarray] = {}
        ub: dict[str, np.ndarray] = {}
        for vr in both:
            _, _, _, ua[vr.variant], ub[vr.variant] = _pair_frame(vr.runs, a, b, "u")
        ci = probability_of_improvement(ua, ub, level=level, n_resamples=n_resamples, seed=seed)
        n = sum(v.size for v in ua.values()) + sum(v.size for v in ub.values())
        out.aggregates.append(AggregateRow("poi", a, b, ci.estimate, ci.lo, ci.hi, n, len(both)))
