"""Seed-paired comparisons of agents per variant, Holm-corrected, plus aggregates across variants."""

from __future__ import annotations

import math
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
    metric: str
    agent_a: str
    agent_b: str
    n_seeds: int
    """Seeds run by A or B."""
    n_pairs: int
    """Pairs that entered the statistics (for ``score``: seeds both scored)."""
    missing_a: list[int]
    """Seeds B ran and A did not (counted as u = 0 / AUC = 0; no score pair)."""
    missing_b: list[int]
    """Seeds A ran and B did not."""
    mean_a: float
    mean_b: float
    delta: float
    """Mean of the per-seed differences A - B (NaN without pairs)."""
    ci_lo: float
    ci_hi: float
    ci_method: str
    p_value: float
    """Two-sided paired permutation p-value (NaN without pairs)."""
    p_holm: float = math.nan
    """Holm-adjusted p-value over all variants and pairs compared on this metric."""


@dataclass
class AggregateRow:
    """An aggregate over variants: IQM of one agent's u, or A's probability of improving on B."""

    kind: str
    """``iqm`` or ``poi``."""
    agent_a: str
    agent_b: str
    """Empty for ``iqm``."""
    estimate: float
    ci_lo: float
    ci_hi: float
    n_runs: int
    n_variants: int


@dataclass
class Comparison:
    """Everything ``bench compare`` reports."""

    agents: tuple[str, ...]
    budget: str
    level: float
    paired: list[PairedRow] = field(default_factory=list)
    aggregates: list[AggregateRow] = field(default_factory=list)
    runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Per-run values used (with a ``variant`` column; missing runs included with ``run_id`` empty)."""
    notes: list[str] = field(default_factory=list)

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


def _with_missing(vr: VariantRuns, agents: tuple[str, ...]) -> pd.DataFrame:
    """The variant's runs plus a placeholder row (u = AUC = 0, no score) per missing (agent, seed)."""
    runs = vr.runs
    seeds = sorted(set(runs["seed"].tolist()))
    have = set(zip(runs["agent"], runs["seed"], strict=True))
    extra = [
        {
            "run_id": "",
            "agent": a,
            "seed": s,
            "score": math.nan,
            "u": 0.0,
            "auc": 0.0 if runs["auc"].notna().any() else math.nan,
        }
        for a in agents
        for s in seeds
        if (a, s) not in have
    ]
    full = (
        pd.concat([runs, pd.DataFrame(extra, columns=runs.columns)], ignore_index=True)
        if extra
        else runs.copy()
    )
    full.insert(0, "variant", vr.variant)
    full["missing"] = full["run_id"] == ""
    return full.sort_values(["agent", "seed"], ignore_index=True)


def _pair(
    vr: VariantRuns,
    full: pd.DataFrame,
    a: str,
    b: str,
    metric: str,
    level: float,
    n_resamples: int,
    seed: int,
) -> PairedRow:
    ra = full[full["agent"] == a].set_index("seed")
    rb = full[full["agent"] == b].set_index("seed")
    seeds = sorted(set(ra.index[~ra["missing"]]) | set(rb.index[~rb["missing"]]))
    missing_a = [s for s in seeds if s not in ra.index or bool(ra.at[s, "missing"])]
    missing_b = [s for s in seeds if s not in rb.index or bool(rb.at[s, "missing"])]
    xa = ra[metric].reindex(seeds).to_numpy(dtype=np.float64)
    xb = rb[metric].reindex(seeds).to_numpy(dtype=np.float64)
    both = ~np.isnan(xa) & ~np.isnan(xb)  # score: only seeds both runs scored; u / AUC: all seeds
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
    )


def compare(
    variants: list[VariantRuns],
    agents: tuple[str, ...],
    *,
    budget: str = "final",
    level: float = 0.95,
    n_resamples: int = 4000,
    seed: int = 0,
) -> Comparison:
    """Compare every pair of ``agents`` (A listed before B) on every variant, then across variants.

    Per variant and metric: mean paired difference A - B with a bootstrap CI and a sign-flip
    permutation p-value; p-values are Holm-adjusted per metric over all (variant, pair) tests.
    A run missing for a seed that the other agent ran counts as u = 0 and AUC = 0, and gives no
    score pair; missing seeds are listed in the result. Across variants: IQM of u per agent and
    the probability of improvement per pair, with stratified bootstrap CIs.

    Args:
        variants: Per-variant runs (:func:`~harness.compare.select.variant_runs`).
        agents: At least two distinct agents.
        budget: Label of where the runs were compared.
        level: Confidence level.
        n_resamples: Bootstrap resamples.
        seed: Seed of all resampling.

    Returns:
        The comparison.

    Raises:
        ValueError: If fewer than two distinct agents are given.
    """
    if len(set(agents)) < 2 or len(set(agents)) != len(agents):
        raise ValueError(f"need at least two distinct agents, got {list(agents)}")
    out = Comparison(agents=agents, budget=budget, level=level)
    fulls = []
    for vr in variants:
        out.notes.extend(vr.notes)
        full = _with_missing(vr, agents)
        fulls.append(full)
        for a in agents:
            if not (full["agent"] == a).any():
                out.notes.append(f"{vr.variant}: no runs of {a}")
        for m in full.loc[full["missing"], ["agent", "seed"]].itertuples(index=False):
            out.notes.append(f"{vr.variant}: {m.agent} has no run for seed {m.seed}: counted as u = 0")
        metrics = [m for m in METRICS if m != "auc" or vr.runs["auc"].notna().any()]
        for metric in metrics:
            for a, b in combinations(agents, 2):
                if (full["agent"] == a).any() and (full["agent"] == b).any():
                    out.paired.append(_pair(vr, full, a, b, metric, level, n_resamples, seed))
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
    _aggregate(out, fulls, agents, level, n_resamples, seed)
    return out


def _aggregate(
    out: Comparison,
    fulls: list[pd.DataFrame],
    agents: tuple[str, ...],
    level: float,
    n_resamples: int,
    seed: int,
) -> None:
    """IQM of u per agent and probability of improvement per pair, over variants every agent ran."""
    shared = [f for f in fulls if all((f["agent"] == a).any() for a in agents)]
    if not shared:
        return
    u = {
        a: {str(f["variant"].iloc[0]): f.loc[f["agent"] == a, "u"].to_numpy() for f in shared} for a in agents
    }
    for a in agents:
        ci = stratified_iqm(u[a], level=level, n_resamples=n_resamples, seed=seed)
        n = sum(v.size for v in u[a].values())
        out.aggregates.append(AggregateRow("iqm", a, "", ci.estimate, ci.lo, ci.hi, n, len(shared)))
    for a, b in combinations(agents, 2):
        ci = probability_of_improvement(u[a], u[b], level=level, n_resamples=n_resamples, seed=seed)
        n = sum(v.size for v in u[a].values()) + sum(v.size for v in u[b].values())
        out.aggregates.append(AggregateRow("poi", a, b, ci.estimate, ci.lo, ci.hi, n, len(shared)))
