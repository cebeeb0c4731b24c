"""Commands that compare and report: ``compare``, ``plot``, ``report``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import tyro

from .console import console, err_console

if TYPE_CHECKING:
    import pandas as pd

    from harness.compare.identity import Selection

# pandas, scipy and the statistics are imported by the command that runs, not when the CLI starts.

EXIT_USAGE = 2


def _known_agents() -> list[str]:
    from agents.registry import AGENTS

    return sorted(AGENTS)


def _select(specs: tuple[str, ...], lbs: list[pd.DataFrame], variant_ids: list[str], pool: bool) -> Selection:
    """Resolve ``--agents`` against the runs of the selected variants (raises on unknown / ambiguous)."""
    import pandas as pd

    from harness.compare.identity import IDENTITY_COLUMN, resolve, with_identity

    rows = pd.concat([with_identity(lb) for lb in lbs], ignore_index=True) if lbs else pd.DataFrame()
    rows = rows[rows["variant"].isin(variant_ids)] if not rows.empty else rows.assign(**{IDENTITY_COLUMN: []})
    return resolve(specs, rows, known_agents=_known_agents(), pool=pool)


def _baseline_label(baseline: str, specs: tuple[str, ...], sel: Selection) -> str:
    """The unit label ``--baseline`` names: a label, or an ``--agents`` entry with or without ``=LABEL``.

    Raises:
        ValueError: If it names none of the entries.
    """
    if baseline in sel.units:
        return baseline
    for spec, label in zip(specs, sel.units, strict=True):  # one unit per entry, in order
        if baseline in (spec, spec.partition("=")[0]):
            return label
    raise ValueError(f"--baseline {baseline!r} is none of the --agents entries {list(specs)}")


def compare(
    env: Annotated[tuple[str, ...], tyro.conf.UseAppendAction],
    agents: tuple[str, ...],
    baseline: str | None = None,
    at_evaluations: int | None = None,
    at_cost: float | None = None,
    at_wall_s: float | None = None,
    all_versions: bool = False,
    pool: bool = False,
    key: str | None = None,
    device: str | None = None,
    leaderboard_dir: Path = Path("leaderboards"),
    results_dir: Path = Path("results"),
    level: float = 0.95,
    resamples: int = 4000,
    seed: int = 0,
    json_out: Annotated[bool, tyro.conf.arg(name="json")] = False,
    csv_out: Annotated[bool, tyro.conf.arg(name="csv")] = False,
) -> int:
    """Compare agents run on the same seeds: paired differences, CIs, permutation tests, IQM.

    Runs are grouped by identity, ``<agent>@<cfg>`` (cfg: a short hash of the configuration,
    models per role and budget), one run per identity and seed (the newest). Per variant and pair
    (A listed before B): mean seed-paired difference A - B in progress u, best score and progress
    AUC, with a bootstrap CI (BCa where it applies) and a sign-flip permutation p-value,
    Holm-adjusted over all variants and pairs. Within a pair, a seed one ran and the other did
    not counts as u = 0 for the other and is listed; an agent with no runs on a variant is listed
    and left out of it. Across variants: IQM of u per agent over the variants it ran and
    probability of improvement per pair, with stratified bootstrap CIs.

    Args:
        env: Variant id; repeat ``--env`` for several variants.
        agents: Two or more entries: ``AGENT`` (its one identity), ``AGENT@CFG`` (a hash prefix),
            a run's ``--label``, any with ``=LABEL`` to name it in the output (else identities are
            named by what differs between them, e.g. ``pacevolve[budget=20]``).
        baseline: Compare each other entry with this one only (an ``--agents`` entry or its
            label): pairs (other, baseline), Holm over those tests; default: every pair.
        at_evaluations: Compare the best score after this many evaluations instead of at the end.
        at_cost: Compare after this much LLM spend (USD).
        at_wall_s: Compare after this many seconds of wall time.
        all_versions: Pool runs scored on different contents of a variant (otherwise refused).
        pool: Let an agent name pool its runs of several identities (otherwise refused).
        key: Compare only runs scored on this held-out key (its fingerprint, ``public``, ``none``);
            runs of different keys are never pooled.
        device: Compare only runs timed on this device (as ``bench leaderboard`` lists it); runs
            of different devices are never pooled.
        leaderboard_dir: Directory of ``<family>.parquet`` tables.
        results_dir: Directory of run directories (for curves, budgets and AUC).
        level: Confidence level.
        resamples: Bootstrap resamples.
        seed: Seed of the resampling.
        json_out: Print JSON.
        csv_out: Print CSV (one long table).
    """
    from harness.compare.anytime import CandidatesMissingError
    from harness.compare.identity import with_identity
    from harness.compare.paired import baseline_pairs
    from harness.compare.paired import compare as run_compare
    from harness.compare.select import Budget, BudgetPastEndError, VersionMixError, variant_runs
    from harness.compare.tables import comparison_csv, comparison_json, comparison_rich
    from harness.envs.registry import default_registry
    from harness.results.leaderboard import load_leaderboard

    reg = default_registry()
    budget = Budget(evaluations=at_evaluations, cost_usd=at_cost, wall_s=at_wall_s)
    env = tuple(dict.fromkeys(env))  # a variant named twice is compared once
    if not env:
        err_console.print("bench: error: give at least one --env")
        return EXIT_USAGE
    try:
        budget.axis()
        variants = [reg.get(e) for e in env]
        tables: dict[str, pd.DataFrame] = {}
        for v in variants:
            if v.family not in tables:
                tables[v.family] = with_identity(load_leaderboard(leaderboard_dir, v.family))
        sel = _select(tuple(agents), list(tables.values()), [v.id for v in variants], pool)
        per_variant = []
        for v in variants:
            per_variant.append(
                variant_runs(
                    tables[v.family],
                    variant=v.id,
                    current_hash=v.hash,
                    maximize=v.maximize,
                    progress=v.progress,
                    units=sel.units,
                    results_dir=results_dir,
                    budget=budget,
                    all_versions=all_versions,
                    key=key,
                    device=device,
                )
            )
        pairs = baseline_pairs(_baseline_label(baseline, agents, sel), list(sel.units)) if baseline else None
        result = run_compare(
            per_variant,
            tuple(sel.units),
            pairs=pairs,
            budget=budget.label(),
            level=level,
            n_resamples=resamples,
            seed=seed,
        )
        result.notes[:0] = sel.notes
    except (VersionMixError, CandidatesMissingError, BudgetPastEndError, ValueError) as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    if result.runs.empty:
        err_console.print(
            f"bench: error: no finished runs of {', '.join(agents)} on {', '.join(env)} in {leaderboard_dir}"
        )
        return EXIT_USAGE
    if json_out:
        sys.stdout.write(comparison_json(result) + "\n")
    elif csv_out:
        sys.stdout.write(comparison_csv(result))
    else:
        console.print(comparison_rich(result, width=console.width))
        from .commands_reference import reference_lines

        for v in variants:  # published programs scored here: labelled lines, outside the comparison
            if (refs := reference_lines(leaderboard_dir, v.family, v.id)) is not None:
                refs.title = f"{v.id}: {refs.title}"
                console.print(refs)
    return 0


def plot(
    out: Path,
    env: str | None = None,
    agents: tuple[str, ...] = (),
    x: Literal["evaluations", "wall_s", "cost_usd"] = "evaluations",
    metric: Literal["score", "u"] = "score",
    train: Path | None = None,
    all_versions: bool = False,
    pool: bool = False,
    key: str | None = None,
    device: str | None = None,
    leaderboard_dir: Path = Path("leaderboards"),
    results_dir: Path = Path("results"),
) -> int:
    """Plot best-so-far curves per agent (mean and 95 % CI band across seeds), or RL diagnostics.

    Args:
        out: Output file, ``.png`` or ``.svg``.
        env: Variant whose runs to plot.
        agents: Agents to plot (``AGENT``, ``AGENT@CFG``, ``...=LABEL``; default: every identity with runs).
        x: x axis: evaluations, wall time or LLM cost.
        metric: ``score`` (best score) or ``u`` (normalised progress).
        train: Instead of curves, plot the diagnostics in this ``train.parquet`` (or run directory).
        all_versions: Pool runs scored on different contents.
        pool: Let an agent name pool its runs of several identities.
        key: Plot only runs scored on this held-out key (runs of different keys are never pooled).
        device: Plot only runs timed on this device (runs of different devices are never pooled).
        leaderboard_dir: Directory of ``<family>.parquet`` tables.
        results_dir: Directory of run directories.
    """
    import pandas as pd

    from harness.compare.anytime import progress_of
    from harness.compare.identity import with_identity
    from harness.compare.select import VersionMixError, agent_curves, degenerate_note
    from harness.envs.registry import default_registry
    from harness.report.axes import score_axis, y_init_of
    from harness.report.plot import curves_figure, save, train_figure
    from harness.results.leaderboard import load_leaderboard

    try:
        if train is not None:
            path = train / "train.parquet" if train.is_dir() else train
            if not path.is_file():
                err_console.print(f"bench: error: no such file: {path}")
                return EXIT_USAGE
            fig = train_figure(pd.read_parquet(path), title=f"RL training diagnostics: {path.parent.name}")
        else:
            if env is None:
                err_console.print("bench: error: give --env (curves) or --train (RL diagnostics)")
                return EXIT_USAGE
            v = default_registry().get(env)
            lb = with_identity(load_leaderboard(leaderboard_dir, v.family))
            sel = _select(tuple(agents), [lb], [v.id], pool) if agents else None
            curves, notes, bounds = agent_curves(
                lb,
                variant=v.id,
                current_hash=v.hash,
                maximize=v.maximize,
                units=sel.units if sel else None,
                results_dir=results_dir,
                with_times=x == "wall_s",
                all_versions=all_versions,
                progress=v.progress,
                key=key,
                device=device,
            )
            if metric == "u" and bounds is not None and curves:
                last = pd.concat([c.groupby("run_id", observed=True)["best"].last() for c in curves.values()])
                note = degenerate_note(v.id, pd.Series(progress_of(last.to_numpy(), *bounds)))
                notes += [note] if note else []
            for n in notes:
                err_console.print(f"note: {n}")
            from harness.references.fetch import load_rows

            refs = {
                r.name: float(r.score)
                for r in load_rows(leaderboard_dir, v.family)
                if r.variant == v.id and r.env_hash == v.hash and r.score is not None
            }
            fig = curves_figure(
                curves,
                axis=x,
                metric=metric,
                y_floor=bounds[0] if bounds else None,
                y_target=bounds[1] if bounds else None,
                title=f"{v.id}@{v.hash}: best so far ({'higher' if v.maximize else 'lower'} is better)",
                references=refs,
                score=score_axis(v),
                y_init=y_init_of(*bounds, v.progress.headroom) if bounds else None,
            )
        written = save(fig, out)
    except (VersionMixError, ValueError) as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    console.print(f"wrote {written}")
    return 0


def report(
    run_dir: Annotated[Path | None, tyro.conf.Positional] = None,
    env: str | None = None,
    out: Path | None = None,
    agents: tuple[str, ...] = (),
    baseline: str | None = None,
    pool: bool = False,
    all_versions: bool = False,
    key: str | None = None,
    leaderboard_dir: Path = Path("leaderboards"),
    results_dir: Path = Path("results"),
) -> int:
    """Write one self-contained report about a run (RUN_DIR) or a variant (--env).

    The variant report leads with what was compared: ``--baseline`` against each other unit,
    else every pair of the ``--agents`` given, else the leader by mean progress against each other
    identity.

    Args:
        run_dir: A run directory.
        env: A variant id (report on all its runs instead).
        out: Output file, ``.html`` or (variant report) ``.md`` with its figures as SVG files
            beside it (default: ``RUN_DIR/report.html`` or ``report-<env>.html``).
        agents: Units to compare (``AGENT``, ``AGENT@CFG``, ``...=LABEL``; default: every identity).
        baseline: The unit every other is compared with (an ``--agents`` entry or an identity).
        pool: Let an agent name pool its runs of several identities.
        all_versions: Pool runs scored on different contents (variant report).
        key: Report only runs scored on this held-out key (variant report).
        leaderboard_dir: Directory of ``<family>.parquet`` tables.
        results_dir: Directory of run directories.
    """
    from harness.compare.select import VersionMixError
    from harness.envs.registry import default_registry
    from harness.report.run_report import build_run_report
    from harness.report.variant_report import build_variant_report
    from harness.results.leaderboard import load_leaderboard
    from harness.results.store import RunStoreError

    if (run_dir is None) == (env is None):
        err_console.print("bench: error: give exactly one of RUN_DIR or --env")
        return EXIT_USAGE
    if run_dir is not None and (agents or baseline):
        err_console.print("bench: error: --agents and --baseline are for a variant report (--env)")
        return EXIT_USAGE
    markdown = out is not None and out.suffix.lower() == ".md"
    if out is not None and out.suffix.lower() not in (".html", ".htm", ".md"):
        err_console.print(f"bench: error: report file must end in .html or .md, got {out.name!r}")
        return EXIT_USAGE
    try:
        if run_dir is not None:
            if markdown:
                err_console.print("bench: error: a run report is HTML only; give --out *.html")
                return EXIT_USAGE
            text = build_run_report(run_dir)
            target = out or run_dir / "report.html"
        else:
            assert env is not None
            v = default_registry().get(env)
            lb = load_leaderboard(leaderboard_dir, v.family)
            units, label = _report_units(agents, baseline, lb, v.id, pool)
            doc = build_variant_report(
                v,
                leaderboard_dir,
                results_dir,
                all_versions=all_versions,
                key=key,
                units=units,
                baseline=label,
            )
            target = out or Path(f"report-{v.id}.html")
            if markdown:
                written = doc.write_markdown(target)
                console.print(f"wrote {target} and {len(written) - 1} figure files beside it")
                return 0
            text = doc.html()
    except (RunStoreError, VersionMixError, ValueError) as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    console.print(f"wrote {target} ({len(text) / 1024:.0f} KiB)")
    return 0


def _report_units(
    agents: tuple[str, ...], baseline: str | None, lb: pd.DataFrame, variant: str, pool: bool
) -> tuple[dict[str, tuple[str, ...]] | None, str | None]:
    """The report's units (None: every identity) and the label of its baseline unit.

    Raises:
        ValueError: If an entry matches no identity, several, or the baseline is not a unit.
    """
    sel = _select(agents, [lb], [variant], pool) if agents else None
    if baseline is None:
        return (sel.units if sel else None), None
    if sel is not None and baseline in sel.units:
        return sel.units, baseline
    (idents,) = _select((baseline,), [lb], [variant], pool).units.values()
    if sel is None:
        return None, idents[0] if len(idents) == 1 else None
    owners = {lab for lab, ids in sel.units.items() if set(ids) & set(idents)}
    if len(owners) != 1:
        raise ValueError(f"--baseline {baseline!r} is none of the --agents entries {list(sel.units)}")
    return sel.units, owners.pop()
