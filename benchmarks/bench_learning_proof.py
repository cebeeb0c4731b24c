"""Trained vs frozen advisor, through the project's own statistics (``bench compare``).

For each learning preset, the same advisor is run twice per seed: trained (the preset's defaults)
and frozen (``lr = 0``: it samples, is scored and logged exactly alike, its adapter never moves).
Every run is a real ``bench run`` into a scratch results/leaderboard directory; then ``bench
compare`` pairs the two identities seed by seed and reports the mean difference in progress u,
best score and progress AUC with bootstrap CIs and sign-flip permutation p-values. Also printed:
each arm's mean step reward in the first and the last quarter of its steps (from ``run.json``).

The policy's CPU threads are fixed by the preset (``policy_threads``) and recorded in each run.
Each run is its own process, forked from one that imported torch, transformers and peft once
(``evobench/cli/preloaded.py``: about 10 s of CPU saved per run; ``--no-preload`` starts every
run from scratch instead, with the same result).

Run (minutes):
  nice -n 15 python benchmarks/bench_learning_proof.py                       # bandit, every preset
  nice -n 15 python benchmarks/bench_learning_proof.py --env llm-sr-phys-osc1-tiny --no-fast \\
      --seeds 8 --implementer-model offline/exact --max-evaluations 81   # a real tiny environment
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Runner = Callable[..., "subprocess.CompletedProcess[str]"]
"""``runner(argv, env=...)``: runs ``bench ARGV`` in a process of its own."""

PRESETS = ("pacevolve++", "thetaevolve", "ttt-discover", "maxk")
"""The learning presets."""
FAST = {
    "policy_max_new_tokens": 16,
    "max_prompt_tokens": 128,
    "constrained_decoding": False,
}
"""Shorter prompts and answers; free decoding (the bandit's arms are the answer's first characters,
and on the byte-level ``tiny-random`` a 16-token answer cannot finish a format). The islands' policy
calls are batched (the default): seed 0 of pacevolve++ learns exactly as it did one call at a time
(mean step reward 1.473 -> 2.202 both ways) in 29 s instead of 42 s. Every learning setting (lr,
LoRA targets, estimator, clipping) stays at the preset's default."""


@dataclass
class Arm:
    """One side of a comparison: a preset, trained or frozen, its runs' summaries."""

    preset: str
    """Agent id."""
    label: str
    """``trained`` or ``frozen``."""
    config: dict[str, Any]
    """``--agent-config`` of its runs."""
    summaries: list[dict[str, Any]] = field(default_factory=list)
    """``agent_summary`` of each finished run (seed order)."""


def _bench() -> list[str]:
    exe = Path(sys.executable).with_name("bench")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "evobench.cli.main"]


def fresh_process(
    argv: Sequence[str], env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``bench ARGV`` as a new interpreter (every import paid again)."""
    return subprocess.run(
        [*_bench(), *argv], capture_output=True, text=True, env={**os.environ, **(env or {})}
    )


def run_arm(arm: Arm, args: argparse.Namespace, out: Path, runner: Runner = fresh_process) -> None:
    """``bench run`` of one arm on every seed (a finished run of the same seed is reused).

    Raises:
        RuntimeError: If a run fails.
    """
    for seed in range(args.seeds):
        marker = out / "done" / f"{arm.preset}-{arm.label}-{seed}.json"
        if marker.exists():
            arm.summaries.append(json.loads(marker.read_text()))
            continue
        cmd = [
            "run", "--agent", arm.preset, "--env", args.env, "--seed", str(seed),
            "--advisor-model", args.advisor_model, "--implementer-model", args.implementer_model,
            "--max-evaluations", str(args.max_evaluations), "--workers", str(args.workers),
            "--agent-config", json.dumps(arm.config), "--results-dir", str(out / "results"),
            "--leaderboard-dir", str(out / "leaderboards"), "--no-progress",
        ]  # fmt: skip
        proc = runner(cmd, env={"PYTHONWARNINGS": "ignore"})
        if proc.returncode != 0:
            raise RuntimeError(f"bench {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        run_dir = Path(proc.stdout.strip().split("results in ")[-1].split()[0])
        info = json.loads((run_dir / "run.json").read_text())
        summary = dict(info.get("agent_summary") or {})
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(summary))
        arm.summaries.append(summary)


def identities(out: Path, env: str, preset: str) -> dict[str, str]:
    """``trained`` / ``frozen`` -> ``<agent>@<cfg>`` of the preset's runs on ``env``.

    Raises:
        RuntimeError: If the leaderboard does not hold exactly one identity of each.
    """
    import pandas as pd

    from harness.compare.identity import IDENTITY_COLUMN, with_identity
    from harness.envs.registry import default_registry

    family = default_registry().get(env).family
    lb = with_identity(pd.read_parquet(out / "leaderboards" / f"{family}.parquet"))
    rows = lb[(lb["agent"] == preset) & (lb["variant"] == env)]
    found: dict[str, set[str]] = {"trained": set(), "frozen": set()}
    for _, row in rows.iterrows():
        lr = json.loads(row["agent_config_json"]).get("lr")
        found["frozen" if lr == 0 else "trained"].add(str(row[IDENTITY_COLUMN]))
    if any(len(v) != 1 for v in found.values()):
        raise RuntimeError(f"expected one trained and one frozen identity of {preset}, found {found}")
    return {k: next(iter(v)) for k, v in found.items()}


def compare(out: Path, env: str, ids: dict[str, str], resamples: int) -> dict[str, Any]:
    """``bench compare --json`` of trained vs frozen.

    Raises:
        RuntimeError: If compare fails.
    """
    cmd = [
        *_bench(), "compare", "--env", env,
        "--agents", f"{ids['trained']}=trained", f"{ids['frozen']}=frozen",
        "--leaderboard-dir", str(out / "leaderboards"), "--results-dir", str(out / "results"),
        "--resamples", str(resamples), "--json",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bench compare failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    text_cmd = [c for c in cmd if c != "--json"]
    table = subprocess.run(text_cmd, capture_output=True, text=True).stdout
    return {"json": json.loads(proc.stdout), "table": table}


def quarter_means(arm: Arm) -> tuple[float, float]:
    """Mean over seeds of the first- and last-quarter mean step reward."""
    firsts = [s["reward_first_quarter"] for s in arm.summaries if "reward_first_quarter" in s]
    lasts = [s["reward_last_quarter"] for s in arm.summaries if "reward_last_quarter" in s]
    return (
        statistics.fmean(firsts) if firsts else float("nan"),
        statistics.fmean(lasts) if lasts else float("nan"),
    )


def prove(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Run both arms of every preset and compare them; returns per preset the compare JSON and table."""
    base = {**(FAST if args.fast else {}), **json.loads(args.agent_config)}
    report: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        runner: Runner = fresh_process
        if args.preload:
            from evobench.cli.preloaded import PreloadedBench

            runner = stack.enter_context(PreloadedBench()).run
        arms = {
            p: (Arm(p, "trained", dict(base)), Arm(p, "frozen", {**base, "lr": 0.0})) for p in args.presets
        }
        for pair in arms.values():
            for arm in pair:
                run_arm(arm, args, out, runner)
    for preset, (trained, frozen) in arms.items():
        result = compare(out, args.env, identities(out, args.env, preset), args.resamples)
        result["quarters"] = {"trained": quarter_means(trained), "frozen": quarter_means(frozen)}
        report[preset] = result
    return report


def parser() -> argparse.ArgumentParser:
    """Command-line options."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default="selftest-bandit-8")
    ap.add_argument("--presets", nargs="+", default=list(PRESETS))
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--max-evaluations", type=int, default=1 + 8 * 16)
    ap.add_argument("--advisor-model", default="tiny-random")
    ap.add_argument("--implementer-model", default="offline/pacevolve")
    ap.add_argument("--agent-config", default="{}", help="JSON added to both arms' configuration")
    ap.add_argument("--fast", action=argparse.BooleanOptionalAction, default=True, help=f"add {FAST}")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--preload",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fork runs from one preloaded process",
    )
    ap.add_argument("--resamples", type=int, default=4000)
    ap.add_argument("--out", type=Path, help="scratch directory (kept; finished runs are reused)")
    ap.add_argument("--json", type=Path, help="also write the report here")
    return ap


def main() -> None:
    args = parser().parse_args()
    import tempfile

    out = args.out or Path(tempfile.mkdtemp(prefix="evobench-proof-"))
    report = prove(args, out)
    for preset, r in report.items():
        (tf, tl), (ff, fl) = r["quarters"]["trained"], r["quarters"]["frozen"]
        print(f"== {preset} on {args.env}, {args.seeds} seeds, {args.max_evaluations} evaluations")
        print(f"mean step reward, first -> last quarter: trained {tf:.3f} -> {tl:.3f}, ", end="")
        print(f"frozen {ff:.3f} -> {fl:.3f}")
        print(r["table"])
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    print(f"runs in {out}")


if __name__ == "__main__":
    main()
