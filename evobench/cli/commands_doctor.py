"""``bench doctor``: report what isolation and resources evaluations get here, and why not more."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import tyro
from rich.table import Table

from harness.doctor.checks import CHECKS, Check, python_facts, run_checks

from .console import console, err_console

if TYPE_CHECKING:
    from harness.doctor.gpu_facts import GpuFacts
    from harness.doctor.gpu_rows import PrepStep

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}


def doctor(
    json_out: Annotated[bool, tyro.conf.arg(name="json")] = False,
    skip: tuple[str, ...] = (),
    gpu: bool = False,
    prepare: bool = False,
    env: tuple[str, ...] = (),
) -> int:
    """Check bubblewrap, namespaces, uid switch, memory limits, Docker, GPU / torch build and data.

    Exits 1 when evaluations cannot work at all here (a ``fail`` finding), else 0. With ``--gpu``:
    the GPU go / no-go table instead (``harness/doctor/gpu.py``): exit 1 on any no-go, and where a
    GPU is present on any row not checked (it prints the commands that prepare this machine);
    without a GPU it lists what it would check and exits 0.

    Args:
        json_out: Print JSON instead of text.
        skip: Checks to leave out (isolation, memory, torch, docker, data, smoke; with --gpu:
            driver, gpus, images, evals, gpu-tests, red-team, vllm).
        gpu: The first command on a GPU machine: driver vs torch's CUDA, the GPU variants that
            fit this machine (their images and initial programs), gpu-marked tests, GPU red team,
            vLLM with LoRA; hard caps, 15 minutes in all.
        prepare: With ``--gpu``: first fetch the fitting variants' data, build their images
            (``bench images build``) and install the vLLM test's policy, then check.
        env: With ``--gpu``: check only these variants' images and evaluations (those a full
            run's caps left not checked).

    Raises:
        SystemExit: On an unknown check, row or variant, or ``--prepare`` / ``--env`` without ``--gpu``.
    """
    if gpu:
        return _gpu_doctor(json_out, skip, prepare, env)
    if prepare or env:
        raise SystemExit("bench doctor: --prepare and --env go with --gpu")
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


def _gpu_doctor(json_out: bool, skip: tuple[str, ...], prepare: bool, only: tuple[str, ...]) -> int:
    from harness.doctor.gpu import GPU_ROWS, exit_code, gather_facts, run_gpu_doctor
    from harness.envs.registry import default_registry

    unknown = [s for s in skip if s not in GPU_ROWS]
    if unknown:
        raise SystemExit(
            f"bench doctor --gpu: unknown row(s) {', '.join(unknown)}; known: {', '.join(GPU_ROWS)}"
        )
    gpu_ids = [v.id for v in default_registry().variants() if v.hardware.gpu_count > 0]
    if [e for e in only if e not in gpu_ids]:
        raise SystemExit(f"bench doctor --gpu: --env takes GPU variants: {', '.join(gpu_ids)}")
    facts = gather_facts()
    if prepare and _prepare(facts, only) != 0:
        return 1
    rows = run_gpu_doctor(facts, skip=tuple(skip), only=only)
    code = exit_code(rows, facts)
    steps = [] if prepare or not facts.present else _prepare_steps(facts, only)
    if json_out:
        out = {
            "go": facts.present and code == 0,
            "gpu": facts.present,
            "rows": [r.to_json() for r in rows],
            "prepare": [s.shown for s in steps],
        }
        print(json.dumps(out, indent=2))
        return code
    table = Table(title="evobench GPU readiness (bench doctor --gpu)")
    for col in ("check", "verdict", "finding", "s"):
        table.add_column(col)
    for r in rows:
        style = {"go": "green", "no-go": "bold red", "not checked": "yellow", "skipped": "dim"}[r.verdict]
        table.add_row(
            r.name, f"[{style}]{r.verdict}[/]", "\n".join([r.summary, *r.details]), f"{r.seconds:.0f}"
        )
    console.print(table)
    nogo = [r.name for r in rows if r.verdict == "no-go"]
    unchecked = [r.name for r in rows if r.verdict == "not checked"]
    if not facts.present:
        console.print("[yellow]no GPU here: the rows above say what a GPU machine would check[/]")
    elif nogo or unchecked:
        parts = [f"no-go: {', '.join(nogo)}"] if nogo else []
        parts += [f"not checked: {', '.join(unchecked)}"] if unchecked else []
        console.print(f"[bold red]{'; '.join(parts)}[/]")
    else:
        skipped = [r.name for r in rows if r.verdict == "skipped"]
        console.print("[bold green]go: GPU variants and the learning agents can run here[/]"
                      + (f" (skipped: {', '.join(skipped)})" if skipped else ""))  # fmt: skip
    if steps:
        console.print("prepare this machine: `bench doctor --gpu --prepare` runs", highlight=False)
        for s in steps:
            console.print(f"  {s.shown}", highlight=False)
    return code


def _prepare_steps(facts: GpuFacts, only: tuple[str, ...]) -> list[PrepStep]:
    """What the rows need and this machine lacks (images only where a Docker daemon answers)."""
    from harness.doctor.gpu_facts import variants_here
    from harness.doctor.gpu_rows import prepare_steps
    from harness.envs.registry import default_registry

    here = variants_here([v for v in default_registry().variants() if v.hardware.gpu_count > 0], facts)
    here = [v for v in here if not only or v.id in only]
    try:
        from harness.images.build import docker_client, image_exists
        from harness.images.naming import env_image_tag

        client = docker_client()
        missing: Callable[[Any], bool] | None = lambda v: not image_exists(client, env_image_tag(v))  # noqa: E731
    except Exception:  # noqa: BLE001 - no daemon: no images to build (the images row says why)
        missing = None
    return prepare_steps(here, missing)


def _prepare(facts: GpuFacts, only: tuple[str, ...]) -> int:
    """Run every preparation step (data fetches, image builds, packages); 1 when one fails."""
    if not facts.gpus:
        console.print("bench doctor --gpu --prepare: no GPU torch can use here, nothing to prepare")
        return 0
    steps = _prepare_steps(facts, only)
    for s in steps:
        console.print(f"[bold]prepare {s.what}:[/] {s.shown}", highlight=False)
        # No cap: a build or download takes what it takes, and is not part of the doctor's 15 min.
        if subprocess.run([sys.executable, *s.argv], check=False).returncode != 0:
            err_console.print(f"bench: error: `{s.shown}` failed; the doctor did not run")
            return 1
    console.print(f"prepared ({len(steps)} step(s)); now the checks", highlight=False)
    return 0


def _print(c: Check) -> None:
    console.print(f"[{_STYLE[c.level]}]{c.level:>4}[/] {c.name:<9} {c.summary}", highlight=False)
    for d in c.details:
        console.print(f"               - {d}", highlight=False)
