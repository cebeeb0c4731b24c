"""``bench doctor``: report what isolation and resources evaluations get here, and why not more."""

from __future__ import annotations

import json
from typing import Annotated

import tyro

from harness.doctor.checks import CHECKS, Check, python_facts, run_checks

from .console import console

_STYLE = {"ok": "green", "info": "cyan", "warn": "yellow", "fail": "bold red"}


def doctor(
    json_out: Annotated[bool, tyro.conf.arg(name="json")] = False,
    skip: tuple[str, ...] = (),
) -> int:
    """Check bubblewrap, namespaces, uid switch, memory limits, Docker, GPU / torch build and data.

    Exits 1 when evaluations cannot work at all here (a ``fail`` finding), else 0.

    Args:
        json_out: Print JSON instead of text.
        skip: Checks to leave out (isolation, memory, torch, docker, data, smoke).
    """
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


def _print(c: Check) -> None:
    console.print(f"[{_STYLE[c.level]}]{c.level:>4}[/] {c.name:<9} {c.summary}", highlight=False)
    for d in c.details:
        console.print(f"               - {d}", highlight=False)
