"""``bench doctor``: report what isolation and resources evaluations get here, and why not more."""

from __future__ import annotations

import json
from typing import Annotated

import tyro
from rich.table import Table

from harness.doctor.checks import CHECKS, Check, python_facts, run_checks

from .console import console

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}


def doctor(
    json_out: Annotated[bool, tyro.conf.arg(name="json")] = False,
    skip: tuple[str, ...] = (),
    gpu: bool = False,
) -> int:
    """Check bubblewrap, namespaces, uid switch, memory limits, Docker, GPU / torch build and data.

    Exits 1 when evaluations cannot work at all here (a ``fail`` finding), else 0. With ``--gpu``:
    the GPU go / no-go table instead (exit 1 on any no-go).

    Args:
        json_out: Print JSON instead of text.
        skip: Checks to leave out (isolation, memory, torch, docker, data, smoke; with --gpu:
            driver, gpus, images, evals, gpu-tests, red-team, vllm).
        gpu: The first command on a GPU machine: driver vs torch's CUDA, GPU variants' images,
            sandboxes and initial programs, gpu-marked tests, GPU red team, vLLM with LoRA.
    """
    if gpu:
        return _gpu_doctor(json_out, skip)
    unknown = [s for s in skip if s not in CHECKS]
    if unknown:
        raise SystemExit(f"bench doctor: unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    checks = run_checks(tuple(skip))
    failed = any(c.level == "fail" for c in checks)
    if json_out:
        out = {**python_facts(), "ok": not failed, "checks": [c.to_json() for c in checks]}
        print(json.dumps(out, indent=2))
    else:
        facts = python_facts()
        console.print(f"evobench doctor (Python {facts['python']}, {facts['executable']})")
        for c in checks:
            _print(c)
        verdict = "evaluations cannot run here" if failed else "evaluations can run here"
        console.print(f"[{'bold red' if failed else 'bold green'}]{verdict}[/]")
    return 1 if failed else 0


def _gpu_doctor(json_out: bool, skip: tuple[str, ...]) -> int:
    from harness.doctor.gpu import GPU_ROWS, run_gpu_doctor

    unknown = [s for s in skip if s not in GPU_ROWS]
    if unknown:
        raise SystemExit(
            f"bench doctor --gpu: unknown row(s) {', '.join(unknown)}; known: {', '.join(GPU_ROWS)}"
        )
    rows = run_gpu_doctor(skip=tuple(skip))
    nogo = [r.name for r in rows if r.verdict == "no-go"]
    unchecked = [r.name for r in rows if r.verdict == "not checked"]
    if json_out:
        print(json.dumps({"go": not nogo and not unchecked, "rows": [r.to_json() for r in rows]}, indent=2))
        return 1 if nogo else 0
    table = Table(title="evobench GPU readiness (bench doctor --gpu)")
    for col in ("check", "verdict", "finding", "s"):
        table.add_column(col)
    for r in rows:
        style = {"go": "green", "no-go": "bold red", "not checked": "yellow"}[r.verdict]
        table.add_row(
            r.name, f"[{style}]{r.verdict}[/]", "\n".join([r.summary, *r.details]), f"{r.seconds:.0f}"
        )
    console.print(table)
    if nogo:
        console.print(f"[bold red]no-go: {', '.join(nogo)}[/]")
    elif unchecked:
        console.print(f"[yellow]not verified here: {', '.join(unchecked)} could not be checked[/]")
    else:
        console.print("[bold green]go: GPU variants and the learning agents can run here[/]")
    return 1 if nogo else 0


def _print(c: Check) -> None:
    console.print(f"[{_STYLE[c.level]}]{c.level:>4}[/] {c.name:<9} {c.summary}", highlight=False)
    for d in c.details:
        console.print(f"               - {d}", highlight=False)
