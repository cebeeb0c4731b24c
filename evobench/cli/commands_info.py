"""Read-only and data commands: ``envs``, ``agents``, ``leaderboard``, ``data``."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Annotated, Any, Literal

import tyro
from rich.table import Table
from rich.text import Text

from harness.envs.data import ChecksumError, family_data_dir, fetch_source, missing_files, sha256_file
from harness.envs.data_import import DataImportError, import_data
from harness.envs.registry import default_registry

from .console import console, err_console, fmt

EXIT_USAGE = 2


def envs(family: str | None = None, json_out: Annotated[bool, tyro.conf.arg(name="json")] = False) -> int:
    """List environment variants with version, content hash and hardware.

    Args:
        family: Only this family (or the family of this variant id).
        json_out: Print JSON instead of a table.
    """
    reg = default_registry()
    variants = reg.family_of(family) if family else reg.variants()
    if json_out:
        rows = [
            {
                "id": v.id,
                "family": v.family,
                "version": v.version,
                "hash": v.hash,
                "tiny": v.tiny,
                "language": v.language.value,
                "entry_point": v.entry_point,
                "signature": v.signature,
                "direction": v.direction.value,
                "timeout_s": v.timeout_s,
                "gpu": v.hardware.gpu,
                "gpu_count": v.hardware.gpu_count,
                "needs_data": [k for k, _ in v.data],
            }
            for v in variants
        ]
        print(json.dumps(rows, indent=2))
        return 0
    t = Table(title="evobench environments")
    for col in ("id", "version", "hash", "direction", "timeout", "hardware", "data", "description"):
        t.add_column(col, overflow="fold")
    for v in variants:
        hw = v.hardware
        hw_s = f"{hw.cpus:g} cpu, {hw.memory_mb} MiB" + (
            f", {hw.gpu_count}x {hw.gpu}" if hw.gpu_count else ""
        )
        data = ", ".join(k for k, _ in v.data) or "synthetic"
        tag = " (tiny)" if v.tiny else ""
        t.add_row(
            v.id + tag,
            v.version,
            v.hash,
            v.direction.value,
            f"{v.timeout_s:g}s",
            hw_s,
            data,
            v.description[:90],
        )
    console.print(t)
    for fam, err in sorted(reg.errors.items()):
        err_console.print(f"broken environment family {fam}: {err}", style="red")
    return 1 if reg.errors else 0


def agents() -> int:
    """List agents, whether they use an LLM, and their configuration fields."""
    from agents.registry import AGENTS

    t = Table(title="evobench agents")
    for col in ("id", "version", "LLM", "description", "config (field=default)"):
        t.add_column(col, overflow="fold")
    for name, cls in sorted(AGENTS.items()):
        fields = ", ".join(f"{k}={f.default!r}" for k, f in cls.Config.model_fields.items())
        t.add_row(name, cls.version, "yes" if cls.uses_llm else "no", cls.description, fields)
    console.print(t)
    return 0


def _one_key(rows: list[dict[str, Any]], v: Any, key: str | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows of one held-out key (``key``, else this installation's where rows span several)."""
    from harness.compare.cfg import UNRECORDED_KEY, heldout_key_of
    from harness.envs.draw_bounds import key_label

    keys = [heldout_key_of(r) for r in rows]
    if key is not None:
        return [r for r, k in zip(rows, keys, strict=True) if k == key], []
    if "none" in keys:  # the variant draws nothing from a key: older rows are on the same data
        keys = ["none" if k == UNRECORDED_KEY else k for k in keys]
    counts = Counter(keys)
    if len(counts) <= 1:
        return rows, []
    here = key_label(v) or "none"
    others = ", ".join(f"{k} ({n} runs)" for k, n in counts.most_common() if k != here)
    note = f"rows of other held-out keys not shown (never pooled): {others}; --key FP shows them"
    return [r for r, k in zip(rows, keys, strict=True) if k == here], [note]


def _export(summary: list[dict[str, Any]], format: str, title: str) -> str:
    """The summary as Markdown, standalone HTML, CSV or JSON (pandas: loaded for exports only)."""
    import pandas as pd

    from harness.compare.tables import frame_html, frame_markdown

    s = pd.DataFrame(summary)
    return {
        "md": lambda: frame_markdown(s),
        "html": lambda: frame_html(s, f"evobench leaderboard: {title}"),
        "csv": lambda: s.to_csv(index=False),
        "json": lambda: s.to_json(orient="records", indent=2, double_precision=15) + "\n",
    }[format]()


def leaderboard(
    env: str,
    leaderboard_dir: Path = Path("leaderboards"),
    all_versions: bool = False,
    format: Literal["table", "md", "html", "csv", "json"] = "table",
    key: str | None = None,
) -> int:
    """Compare agents on one variant: runs, best, mean +- SEM of best score, progress.

    One row per run identity ``<agent>@<cfg>`` (agent, configuration, models, budget; see
    ``bench compare``), one run per seed (the newest): different configurations are never pooled.
    Identities are named by what differs between those shown (``pacevolve[budget=20]``), or by
    their runs' ``--label``; the ``cfg`` column holds the hash ``--agents`` accepts.

    Args:
        env: Variant id (e.g. ``eplb-tiny``).
        leaderboard_dir: Directory of ``<family>.parquet`` tables.
        all_versions: Pool rows made on older contents of the variant (different hash).
        format: ``table`` (terminal) or an export format: Markdown, standalone HTML, CSV, JSON
            (with a ``label`` column beside ``identity``).
        key: Show runs of this held-out key (fingerprint, ``public``, ``none``); default: this
            installation's key where the variant's rows span several (keys are never pooled).
    """
    # Records read with pyarrow, no pandas: this command starts in well under 1 s of CPU (issue 36).
    from harness.compare.labels import record_labels
    from harness.results.summary import number, read_records, summarize_records

    v = default_registry().get(env)
    rows = [r for r in read_records(leaderboard_dir, v.family) if r.get("variant") == v.id]
    stale = sum(r.get("env_hash") != v.hash for r in rows)
    if not all_versions:
        rows = [r for r in rows if r.get("env_hash") == v.hash]
    rows, key_notes = _one_key(rows, v, key)
    if not rows:
        for n in key_notes:
            console.print(f"[dim]{n}[/dim]")
        console.print(
            f"No finished runs for {v.id}@{v.hash} in {leaderboard_dir}."
            + (f" ({stale} rows from other contents; --all-versions shows them)" if stale else "")
        )
        return 0
    labels = record_labels(rows)
    s = [{"label": labels[r["identity"]], **r} for r in summarize_records(rows, v.id)]
    if format != "table":
        s = [{k: r[k] for k in ("variant", "identity", "label", *list(r)[3:])} for r in s]
        sys.stdout.write(_export(s, format, f"{v.id} v{v.version} ({v.hash})"))
        return 0
    arrow = "higher ↑" if v.maximize else "lower ↓"
    t = Table(title=f"{v.id} v{v.version} ({v.hash}): score, {arrow} is better")
    # labels may fold (every character stays, so pacevolve[…] and pacevolve++ stay distinct);
    # numbers never wrap
    t.add_column("agent", overflow="fold", min_width=12)
    t.add_column("cfg", no_wrap=True)
    # runs timed on different GPUs are never pooled: each device gets its own row, named here
    by_device = any(r["device"] for r in s)
    if by_device:
        t.add_column("device", overflow="fold")
    for col in ("runs", "best", "mean ± SEM", "u ± SEM", "infra", "cost $"):
        t.add_column(col, no_wrap=True, justify="right")
    for r in s:
        t.add_row(
            Text(str(r["label"])),  # not markup: pacevolve[budget=20] would lose its brackets
            str(r["identity"]).partition("@")[2],
            *([str(r["device"]) or "not recorded"] if by_device else []),
            str(r["runs"]),
            fmt(r["best"]),
            f"{fmt(r['score_mean'])} ± {fmt(r['score_sem'], 2)}",
            f"{fmt(r['progress_mean'], 3)} ± {fmt(r['progress_sem'], 2)}",
            str(r["n_infra_error"]),
            fmt(r["cost_usd"], 3),
        )
    console.print(t)
    for n in key_notes:
        console.print(f"[dim]{n}[/dim]")
    if len(rows) >= 2 and all((number(r.get("progress")) or 0.0) <= 0.0 for r in rows):
        console.print("[yellow]note: u is 0 for every run (none above the floor); compare best scores[/]")
    if len({r["device"] for r in s}) > 1:
        console.print("[dim]Runs timed on different devices are listed separately, never pooled.[/dim]")
    older = sum(r["older_duplicates"] for r in s)
    if older:
        console.print(f"[dim]{older} older run(s) of a seed already run by the same identity ignored.[/dim]")
    from .commands_reference import reference_lines

    if (refs := reference_lines(leaderboard_dir, v.family, v.id)) is not None:
        console.print(refs)
    if stale and not all_versions:
        console.print(f"[dim]{stale} rows from other contents of {v.id} hidden (--all-versions).[/dim]")
    return 0


def data(
    action: tyro.conf.Positional[Literal["fetch", "status", "import"]],
    family: tyro.conf.Positional[str],
    directory: tyro.conf.Positional[Path | None] = None,
) -> int:
    """Fetch a family's public data into the cache, import it from a local copy, or show its status.

    Every file is sha256-checked against the manifest (unpinned sources: against the checksum
    recorded on their first fetch or import).

    Args:
        action: ``fetch`` downloads what is missing; ``import`` installs it from DIRECTORY
            (air-gapped machines; all or nothing); ``status`` lists files and checksums.
        family: Family name, e.g. ``eplb`` (for ``import`` also a variant id: only its data).
        directory: For ``import``: a local directory or mirror laid out like the family's cache
            directory (or a data-root mirror holding ``<family>/``).
    """
    if action == "import":
        return _data_import(family, directory)
    if directory is not None:
        err_console.print(f"bench: error: `bench data {action}` takes no directory")
        return EXIT_USAGE
    reg = default_registry()
    variants = reg.family_of(family)
    sources = {k: s for v in variants for k, s in v.data}
    fam = variants[0].family
    d = family_data_dir(fam)
    if not sources:
        console.print(f"{fam}: all variants use generated data; nothing to fetch.")
        return 0
    code = 0
    for key, src in sources.items():
        path = d / src.filename
        if action == "status":
            if src.files:
                miss = missing_files(d, src)
                console.print(
                    f"{fam}/{key}: {path}/ {len(src.files) - len(miss)}/{len(src.files)} files present "
                    f"(all sha256-pinned); licence: {src.license or '?'}"
                )
                continue
            state = f"present, sha256 {sha256_file(path)}" if path.is_file() else "missing"
            pin = src.sha256 or "unpinned (recorded on first fetch)"
            console.print(f"{fam}/{key}: {path} {state}; expected {pin}; licence: {src.license or '?'}")
            continue
        console.print(f"fetching {fam}/{key} from {src.url} (~{src.size_hint_mb:g} MB) ...")
        try:
            out = fetch_source(fam, src)
            detail = f"{len(src.files)} files verified" if src.files else f"sha256 {sha256_file(out)}"
            console.print(f"  ok: {out} {detail}")
        except ChecksumError as e:
            err_console.print(f"  checksum mismatch: {e}")
            code = 1
        except OSError as e:
            err_console.print(f"  download failed: {e}")
            code = 1
    if code:
        print("bench: some data could not be fetched", file=sys.stderr)
    return code


def _data_import(name: str, directory: Path | None) -> int:
    if directory is None:
        err_console.print("bench: error: `bench data import FAMILY DIR` needs the directory to import from")
        return EXIT_USAGE
    try:
        report = import_data(name, directory)
    except DataImportError as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    except ChecksumError as e:
        err_console.print(f"checksum mismatch: {e}")
        return 1
    if not (report.installed or report.unchanged):
        console.print(f"{report.family}: all variants use generated data; nothing to import.")
        return 0
    console.print(
        f"{report.family}: {len(report.installed)} files installed, {len(report.unchanged)} already "
        f"present (sha256 verified) in {family_data_dir(report.family)}"
    )
    for name_, sha in sorted(report.recorded.items()):
        console.print(f"  recorded sha256 of unpinned {name_}: {sha}")
    return 0
