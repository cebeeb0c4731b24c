"""``bench report RUN_DIR``: one self-contained HTML page about one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from harness.compare.anytime import best_so_far, read_candidates
from harness.results.store import RunStore

from . import page
from .axes import ScoreAxis, score_axis
from .cases import cases_section
from .plot import AXIS_LABELS, curves_figure, train_figure

TRAIN_FILE = "train.parquet"
PACE_FILE = "pace.parquet"
PACE_COLUMNS = (
    "step",
    "timescale",
    "event",
    "delta_u",
    "saturated",
    "subset",
    "u_old",
    "u_new",
    "accepted",
    "reason",
)
LLM_FILE = "llm_calls.parquet"


def status_section(cands: pd.DataFrame) -> str:
    """Counts per status and the most frequent failure reasons (first line, truncated)."""
    if cands.empty:
        return "<p>No evaluations.</p>"
    counts = cands["status"].astype(str).value_counts()
    html = page.table(
        ["status", "evaluations", "share"], [(s, int(n), f"{n / len(cands):.0%}") for s, n in counts.items()]
    )
    failed = cands[cands["status"].astype(str) != "ok"]
    if not failed.empty:
        first = failed["reason"].fillna("").astype(str).str.strip().str.split("\n").str[-1].str.slice(0, 200)
        first = first.replace("", "(no reason given)")
        top = first.groupby([failed["status"].astype(str), first]).size()
        top = top.sort_values(ascending=False).head(15)
        html += "<p>Most frequent failure reasons (last line of the message):</p>"
        rows = [(*key, int(n)) for key, n in zip(top.index.tolist(), top.tolist(), strict=True)]
        html += page.table(["status", "reason", "count"], rows)
    return html


def llm_section(run_dir: Path) -> str:
    """LLM calls, tokens and spend per role from ``llm_calls.parquet``."""
    path = run_dir / LLM_FILE
    if not path.is_file():
        return "<p>No LLM ledger (<code>llm_calls.parquet</code>): the agent made no model calls.</p>"
    calls = pd.read_parquet(path)
    if calls.empty:
        return "<p>The LLM ledger is empty.</p>"
    g = calls.groupby(["role", "model", "kind"], sort=True)
    agg = pd.DataFrame(
        {
            "calls": g.size(),
            "failed": g["ok"].apply(lambda s: int((~s.astype(bool)).sum())),
            "cache hits": g["cache_hit"].sum().astype(int),
            "tokens in": g["tokens_in"].sum().astype(int),
            "tokens out": g["tokens_out"].sum().astype(int),
            "cost USD": g["cost_usd"].sum(),
            "latency s": g["latency_s"].sum(),
        }
    ).reset_index()
    rows = [tuple(r) for r in agg.itertuples(index=False)]
    total = (
        "total",
        "",
        "",
        int(agg["calls"].sum()),
        int(agg["failed"].sum()),
        int(agg["cache hits"].sum()),
        int(agg["tokens in"].sum()),
        int(agg["tokens out"].sum()),
        float(agg["cost USD"].sum()),
        float(agg["latency s"].sum()),
    )
    html = page.table(list(agg.columns), [*rows, total])
    if "cost_known" in calls and not calls["cost_known"].all():
        html += "<p class='note'>Some models have no entry in the cost map; their spend counts as 0.</p>"
    return html


def effective_models(run_dir: Path) -> dict[str, list[str]] | None:
    """Role -> the models that role really called, from the LLM ledger (None: no ledger).

    The configured models (``run.json``) can name an LLM for a role that in fact ran on the
    offline proposer or was never called; the ledger records what each call used.

    Raises:
        pyarrow.ArrowInvalid: If the ledger is unreadable.
    """
    path = run_dir / LLM_FILE
    if not path.is_file():
        return None
    calls = pd.read_parquet(path, columns=["role", "model"])
    return {
        str(role): sorted(set(g["model"].astype(str)))
        for role, g in calls.groupby(calls["role"].astype(str), sort=True)
    }


def _models_called(run_dir: Path) -> str:
    called = effective_models(run_dir)
    if not called:
        return "none (no model calls recorded)"

    def name(m: str) -> str:
        return m + (" (offline proposer, not an LLM)" if m.startswith("offline/") else "")

    return "; ".join(f"{role}: {', '.join(name(m) for m in ms)}" for role, ms in called.items())


def _config_pairs(store: RunStore) -> list[tuple[str, Any]]:
    from harness.compare.identity import cfg_hash

    i = store.info
    return [
        ("run id", i.run_id),
        ("status", i.status),
        ("agent", f"{i.agent} {i.agent_version}".strip()),
        ("identity", f"{i.agent}@{cfg_hash(i.agent_config, i.models, i.budget)}"),
        *([("label", i.label)] if i.label else []),
        ("agent config", json.dumps(i.agent_config, sort_keys=True)),
        ("models configured", json.dumps(i.models, sort_keys=True) if i.models else "none"),
        ("models called", _models_called(store.run_dir)),
        ("variant", f"{i.env_id} (family {i.family} v{i.env_version})"),
        ("content hash", i.env_hash),
        ("seed", i.seed),
        ("budget", json.dumps(i.budget, sort_keys=True)),
        ("backend / workers", f"{i.backend} / {i.workers}"),
        ("started / ended", f"{i.started_at} / {i.ended_at or '-'}"),
        ("evaluations", i.n_evaluations),
        ("best score", i.best_score),
        ("git commit", f"{i.git_commit or 'unknown'}{' (dirty)' if i.git_dirty else ''}"),
        ("host / python", f"{i.host} / {i.python}"),
        ("command", " ".join(i.command)),
        ("package versions", ", ".join(f"{k} {v}" for k, v in sorted(i.package_versions.items()))),
    ]


def _initial_program(store: RunStore, cands: pd.DataFrame) -> tuple[str, str] | None:
    """The variant's initial program from the registry, else the run's first evaluated program."""
    from harness.envs.registry import UnknownIdError, default_registry

    try:
        v = default_registry().get(store.info.env_id)
        note = (
            ""
            if v.hash == store.info.env_hash
            else f" (content {v.hash}; the run used {store.info.env_hash})"
        )
        return v.initial_program, f"initial program {v.initial_program_name}{note}"
    except (UnknownIdError, KeyError, OSError, ValueError):  # also: derived from data not fetched here
        pass
    if cands.empty:
        return None
    first = cands.sort_values("seq").iloc[0]
    try:
        return store.get_program(str(first["program_sha256"])), "first evaluated program"
    except (KeyError, ValueError):
        return None


def best_program_section(store: RunStore, cands: pd.DataFrame, maximize: bool) -> str:
    """The best program's score and its diff against the initial program."""
    ok = cands[(cands["status"].astype(str) == "ok") & cands["score"].notna()]
    if ok.empty:
        return "<p>No evaluation scored; there is no best program.</p>"
    best = ok.sort_values(["score", "seq"], ascending=[not maximize, True]).iloc[0]
    sha = str(best["program_sha256"])
    try:
        source = store.get_program(sha)
    except (KeyError, ValueError) as e:
        return f"<p class='note'>Best program {page.esc(sha)} is not stored: {page.esc(e)}</p>"
    head = page.kv_table(
        [("score", float(best["score"])), ("evaluation seq", int(best["seq"])), ("sha256", sha)]
    )
    initial = _initial_program(store, cands)
    if initial is None:
        return head + f"<pre>{page.esc(source)}</pre>"
    return head + page.diff_block(initial[0], source, initial[1], f"best program (seq {int(best['seq'])})")


def build_run_report(run_dir: Path) -> str:
    """Render the report of one run directory.

    Args:
        run_dir: A run directory (``results/<run-id>``).

    Returns:
        The HTML document.

    Raises:
        RunStoreError: If ``run_dir`` is not a readable run directory.
    """
    from harness.envs.registry import UnknownIdError, default_registry

    store = RunStore.open(Path(run_dir), readonly=True)
    info = store.info
    cands = store.read_parquet()
    if cands.empty and store.journal_path.exists():  # a killed run never flushed: fall back to the journal
        cands = store.candidates_table().to_pandas()
    try:
        v = default_registry().get(info.env_id)
        pb = info.progress_bounds  # the run's own draw's bounds; older runs: the manifest's
        maximize = v.maximize
        bounds = (pb.y_floor, pb.y_target) if pb else (v.progress.y_floor, v.progress.y_target)
        sax: ScoreAxis | None = score_axis(v)
        y_init: float | None = pb.y_init if pb else v.progress.y_init
    except UnknownIdError:
        maximize, bounds, sax, y_init = True, None, None, None
    sections: list[tuple[str, str]] = [("Configuration and provenance", page.kv_table(_config_pairs(store)))]
    figs, notes = [], ""
    if not cands.empty and store.parquet_path.is_file():
        curves = best_so_far(
            read_candidates({info.run_id: store.parquet_path}, with_times=True), maximize=maximize
        )
        for axis in ("evaluations", "wall_s", "cost_usd"):
            try:
                fig = curves_figure(
                    {info.agent: curves},
                    axis=axis,
                    title=f"best score so far vs {AXIS_LABELS[axis]}",
                    score=sax,
                    y_init=y_init,
                    y_target=bounds[1] if bounds else None,
                )
            except ValueError as e:
                notes += f"<p class='note'>{page.esc(e)}</p>"
                continue
            figs.append(page.figure(fig))
        if bounds is not None:
            figs.append(
                page.figure(
                    curves_figure(
                        {info.agent: curves},
                        metric="u",
                        y_floor=bounds[0],
                        y_target=bounds[1],
                        y_init=y_init,
                        score=sax,
                        title="normalised progress u",
                    )
                )
            )
    body = page.figures(figs) + notes if figs else "<p>No curves: the run has no flushed candidates.</p>"
    sections.append(("Best-so-far curves", body))
    train = Path(run_dir) / TRAIN_FILE
    if train.is_file():
        try:
            sections.append(("RL training diagnostics", page.figure(train_figure(pd.read_parquet(train)))))
        except ValueError as e:
            sections.append(("RL training diagnostics", f"<p class='note'>{page.esc(e)}</p>"))
    pace = Path(run_dir) / PACE_FILE
    if pace.is_file():
        sections.append(
            ("PACE timescales, saturation and gate decisions", pace_section(pd.read_parquet(pace)))
        )
    sections.append(
        (
            "Best program vs initial program",
            best_program_section(store, cands, maximize) if not cands.empty else "<p>No evaluations.</p>",
        )
    )
    sections.append(("Evaluation outcomes", status_section(cands)))
    sections.append(("Per-case results", cases_section(cands, maximize)))
    sections.append(("LLM spend by role", llm_section(Path(run_dir))))
    sub = f"{info.agent} on {info.env_id}@{info.env_hash}, seed {info.seed}; {info.status}, "
    sub += f"{len(cands)} evaluations"
    return page.page(f"evobench run {info.run_id}", sub, sections)


def pace_section(t: pd.DataFrame) -> str:
    """Table of PACE's controller events (``pace.parquet``): rounds, saturation, edits, gates, rollbacks."""
    if t.empty:
        return "<p>No PACE events.</p>"

    def cell(v: Any) -> str:
        if v is None or (isinstance(v, float) and v != v):
            return ""
        return f"{v:.4f}" if isinstance(v, float) else str(v)

    cols = [c for c in PACE_COLUMNS if c in t.columns]
    rows = [[cell(r[c]) for c in cols] for r in t[cols].to_dict("records")]
    return page.table(cols, rows)
