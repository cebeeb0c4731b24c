"""Evaluate each family's initial program on one variant (the tiny one) with the installed ``bench``.

Used by ``scripts/user-install.sh`` to check the install users really have (plain ``pip install``,
whatever torch build the index serves). Exits non-zero if any evaluation is not ``ok``.

Usage: ``python scripts/eval_initial_programs.py [--backend local] [--mode cold] [VARIANT ...]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.envs.registry import Variant, default_registry


def one_variant_per_family(wanted: list[str]) -> list[Variant]:
    """The requested variants, or each family's tiny variant (its first variant if it has none)."""
    reg = default_registry()
    if wanted:
        return [reg.get(v) for v in wanted]
    chosen = []
    for family in reg.families():
        variants = reg.variants(family)
        tiny = [v for v in variants if v.tiny]
        chosen.append((tiny or variants)[0])
    return chosen


def main() -> int:
    """Run ``bench eval`` on each chosen variant; print one line per variant and a summary."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("variants", nargs="*")
    ap.add_argument("--backend", default="local")
    ap.add_argument("--mode", default="cold")
    args = ap.parse_args()
    bench = str(Path(sys.executable).with_name("bench"))
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for v in one_variant_per_family(args.variants):
            prog = Path(tmp) / f"{v.id}-{v.initial_program_name}"
            prog.write_text(v.initial_program, encoding="utf-8")
            cmd = [bench, "eval", "--env", v.id, "--backend", args.backend, "--mode", args.mode, "--json"]
            t0 = time.monotonic()
            p = subprocess.run([*cmd, str(prog)], capture_output=True, text=True)
            dt = time.monotonic() - t0
            try:
                result = json.loads(p.stdout)
                status, score = result.get("status"), result.get("score")
            except json.JSONDecodeError:
                status, score = f"unreadable output (exit {p.returncode})", None
            print(f"{v.id:24s} {status!s:12s} score={score} ({dt:.1f} s)", flush=True)
            if status != "ok":
                failed.append(v.id)
                print((p.stdout + p.stderr)[-3000:], file=sys.stderr)
    if failed:
        print(f"eval-initial-programs: not ok: {', '.join(failed)}", file=sys.stderr)
        return 1
    print("eval-initial-programs: all ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
