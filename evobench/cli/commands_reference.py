"""``bench reference list|fetch|eval FAMILY``: the papers' published programs as labelled rows."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import tyro
from rich.table import Table

from harness.envs.registry import default_registry
from harness.references.fetch import (
    ReferenceError,
    ReferenceRow,
    cached_path,
    fetch_reference,
    load_rows,
    save_rows,
)
from harness.references.manifest import load_references
from harness.sandbox.factory import BackendName, make_backend

from .console import console, err_console, fmt

EXIT_FAILED, EXIT_USAGE = 1, 2


def reference(
    action: tyro.conf.Positional[Literal["list", "fetch", "eval"]],
    family: tyro.conf.Positional[str],
    leaderboard_dir: Path = Path("leaderboards"),
    backend: BackendName = "local",
    mirror: Path | None = None,
) -> int:
    """List, fetch (sha256-verified) or score a family's published reference programs.

    Scores are written to ``LEADERBOARD_DIR/<family>.references.json`` and shown by
    ``bench leaderboard`` as reference lines, never as runs.

    Args:
        action: ``list`` entries and their paper figures; ``fetch`` them into the data cache;
            ``eval`` score the fetched ones on their variants like any candidate.
        family: Family name, e.g. ``ahc039``.
        leaderboard_dir: Where the scored rows go.
        backend: Where to evaluate.
        mirror: ``fetch`` from this local checkout of the references' repository (air-gapped
            machines) instead of their URLs; the pinned sha256 still decides.
    """
    variants = default_registry().family_of(family)
    fam = variants[0].family
    refs = load_references(variants[0].family_dir)
    if not refs:
        console.print(f"{fam}: no reference programs named (environments/{fam}/references.toml).")
        return 0
    if action == "list":
        t = Table(title=f"{fam}: published reference programs")
        for col in ("name", "variant", "paper", "protocol", "sha256", "license", "url"):
            t.add_column(col)
        for r in refs:
            paper = f"{fmt(r.paper_value)} {r.paper_metric}" if r.paper_value is not None else "-"
            sha = r.sha256[:12] if r.sha256 else "not pinned (unverified)"
            t.add_row(r.name, r.variant, paper, r.protocol, sha, r.license, r.url)
        console.print(t)
        return 0
    code = 0
    if action == "fetch":
        for r in refs:
            try:
                console.print(f"{r.name}: {fetch_reference(fam, r, mirror=mirror)}")
            except ReferenceError as e:
                err_console.print(f"bench: {e}")
                code = EXIT_FAILED
        return code
    rows = []
    with make_backend(backend, workers=1) as b:
        for r in refs:
            path = cached_path(fam, r)
            if not path.is_file():
                err_console.print(f"bench: {r.name}: not fetched (bench reference fetch {fam})")
                code = EXIT_FAILED
                continue
            res = b.evaluate(default_registry().get(r.variant), path.read_text(encoding="utf-8"))
            rows.append(ReferenceRow.of(r, res))
            paper = fmt(r.paper_value) if r.paper_value is not None else "-"
            console.print(f"{r.name} on {r.variant}: {res.status.value} {fmt(res.score)} (paper: {paper})")
    if rows:
        console.print(f"written: {save_rows(leaderboard_dir, fam, rows)}")
    return code


def reference_lines(leaderboard_dir: Path, family: str, variant: str) -> Table | None:
    """The scored references of ``variant`` as a labelled table (None when there are none)."""
    rows = [r for r in load_rows(leaderboard_dir, family) if r.variant == variant]
    if not rows:
        return None
    t = Table(title="reference programs (published; not runs)")
    for col in ("reference", "status", "score here", "paper", "paper's protocol"):
        t.add_column(col)
    for r in rows:
        t.add_row(f"[ref] {r.name}", r.status, fmt(r.score), fmt(r.paper_value), r.protocol)
    return t
