"""Trained vs frozen vs a non-learning bandit advisor, in ONE ``bench compare`` (Holm across all).

Every arm runs per seed as a real ``bench run`` into a scratch results/leaderboard directory:

* for each learning preset, **trained** (the preset's defaults) and **frozen** (``lr = 0``: it
  samples, is scored and logged exactly alike, its adapter never moves);
* **bandit-ucb** (``--agent pacevolve++`` with ``advisor_rule = bandit-ucb``): UCB1 over the
  offered edit families, the same scaffold, implementer and rewards; no model, no weights learned
  (``agents/learning/bandit.py``). The adaptive rule a trained advisor has to beat.

Then ONE ``bench compare`` over every arm of every preset: each pair's mean seed-paired
difference in progress u, best score and progress AUC, with bootstrap CIs and sign-flip p-values,
Holm-adjusted per metric over all pairs compared (so the presets tried on one variant are
corrected together). Also printed: each arm's mean step reward in the first and the last quarter
of its steps (``run.json``).

The environment, seeds and settings are fixed below (:data:`PLAN`) before any run. Every
command-line flag that changes them makes the run exploratory: the report lists what differs
from the plan, and nothing but the plan's own run is a confirmatory result. The plan's run
(8 seeds x 5 arms x 41 evaluations) takes about an hour and a half on two cores.

The policy's CPU threads are fixed by the preset (``policy_threads``) and recorded in each run.
Each run is its own process, forked from one that imported torch, transformers and peft once
(``evobench/cli/preloaded.py``; ``--no-preload`` starts every run from scratch instead).

Run:
  python benchmarks/bench_learning_proof.py --out proof-run --json proof.json   # the plan (~90 min)
  python benchmarks/bench_learning_proof.py --seeds 0 1 --llm-advisor "" \\
      --max-evaluations 17 --resamples 200                             # a smoke run (minutes)
  python benchmarks/bench_learning_proof.py --env selftest-bandit-8 --fast --seeds 0 1 2 3 4 5 \\
      --implementer-model offline/pacevolve --max-evaluations 129 --no-bandit --llm-advisor "" \\
      --agent-config '{}'                                              # the CI version
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Runner = Callable[..., "subprocess.CompletedProcess[str]"]
"""``runner(argv, env=...)``: runs ``bench ARGV`` in a process of its own."""

BANDIT = "bandit-ucb"
"""Label (and ``advisor_rule``) of the non-learning adaptive arm."""
BANDIT_AGENT = "pacevolve++"
"""The agent whose scaffold the bandit arm runs on (its optimiser settings are unused)."""
FAST = {
    "policy_max_new_tokens": 16,
    "max_prompt_tokens": 128,
    "constrained_decoding": False,
}
"""``--fast``: shorter prompts and answers, free decoding (for ``selftest-bandit-8``, whose arms are
the answer's first characters: on the byte-level ``tiny-random`` a 16-token answer cannot finish a
format). Every learning setting (lr, LoRA targets, estimator, clipping) stays at the preset's
default."""


@dataclass(frozen=True)
class Plan:
    """What the proof runs, fixed before any run (the command-line defaults)."""

    env: str
    """The variant."""
    seeds: tuple[int, ...]
    """Seeds, the same for every arm (fresh ones: no earlier proof used them)."""
    max_evaluations: int
    """Evaluations per run."""
    presets: tuple[str, ...]
    """Learning presets, each run trained and frozen."""
    bandit: bool
    """Also run the ``bandit-ucb`` arm."""
    advisor_model: str
    """The trained (and frozen) advisor: ``tiny-random`` is a 35 k-parameter random LLaMA-shaped
    network with a byte tokenizer (LoRA on its output head): a test of the RL machinery, not a
    language model."""
    implementer_model: str
    """The frozen implementer (``offline/exact``: applies the named edit; not an LLM)."""
    fast: bool
    """Add :data:`FAST` to every arm."""
    agent_config: str
    """JSON added to every arm's configuration."""
    resamples: int
    """Bootstrap resamples of ``bench compare``."""
    llm_advisor: str
    """A real language model run as the advisor of :attr:`llm_presets`, trained and frozen, in the
    same comparison (``""``: none)."""
    llm_presets: tuple[str, ...]
    """Presets run with :attr:`llm_advisor`."""
    llm_config: str
    """JSON added to the configuration of the :attr:`llm_advisor` arms only (its CPU cost)."""


PLAN = Plan(
    env="llm-sr-phys-osc1-tiny",
    seeds=tuple(range(100, 108)),
    max_evaluations=41,
    presets=("pacevolve++",),
    bandit=True,
    advisor_model="tiny-random",
    implementer_model="offline/exact",
    fast=False,
    agent_config='{"islands": 4, "k": 2, "policy_threads": 1}',
    resamples=4000,
    llm_advisor="smollm2-135m",
    llm_presets=("pacevolve++",),
    llm_config='{"max_prompt_tokens": 160}',
)
"""The registered proof, fixed on 2026-11-28 before any of its runs: the real tiny LLM-SR variant,
constrained decoding, the exact implementer, on 8 seeds no earlier proof used; ten steps of four
islands (41 evaluations; SLOO k 2 in groups of four). Arms: pacevolve++ with ``tiny-random``
trained and frozen, pacevolve++ with SmolLM2-135M trained and frozen (prompts cut to 160 tokens: a
step's three advisor stages sample four answers each; one core a run, two runs at once), and the
bandit: 5 arms, one comparison, Holm over all 10 pairs per metric. It is sized to run in about an
hour and a half on this two-core machine, so the other presets (each compared alone before, at
eight islands and 81 evaluations) are left out of it."""


@dataclass
class Arm:
    """One arm of the comparison: an agent with one configuration, its runs' summaries."""

    agent: str
    """Agent id (``bench run --agent``)."""
    label: str
    """``<preset>/trained``, ``<preset>/frozen`` (``<preset>/<llm>/...`` with the real-LLM advisor)
    or ``bandit-ucb`` (its name in the comparison)."""
    config: dict[str, Any]
    """``--agent-config`` of its runs."""
    advisor_model: str
    """``--advisor-model`` of its runs."""
    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Seed -> ``agent_summary`` of its finished run (plus ``wall_s``, the run's wall time)."""


def arms_of(args: argparse.Namespace) -> list[Arm]:
    """Every arm the arguments ask for, in the comparison's order."""
    base = {**(FAST if args.fast else {}), **json.loads(args.agent_config)}
    model = args.advisor_model
    arms = []
    for p in args.presets:
        arms += [
            Arm(p, f"{p}/trained", dict(base), model),
            Arm(p, f"{p}/frozen", {**base, "lr": 0.0}, model),
        ]
    if args.llm_advisor:
        llm = {**base, **json.loads(args.llm_config)}
        short = llm_short(args.llm_advisor)
        for p in args.llm_presets:
            arms += [
                Arm(p, f"{p}/{short}/trained", dict(llm), args.llm_advisor),
                Arm(p, f"{p}/{short}/frozen", {**llm, "lr": 0.0}, args.llm_advisor),
            ]
    if args.bandit:
        arms.append(Arm(BANDIT_AGENT, BANDIT, {**base, "advisor_rule": BANDIT}, model))
    return arms


def llm_short(model: str) -> str:
    """A model id as a label part (``smollm2-135m`` -> ``smollm2``)."""
    return model.rsplit("/", 1)[-1].split("-")[0].lower()


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


def run_seed(
    arms: Sequence[Arm], seed: int, args: argparse.Namespace, out: Path, runner: Runner = fresh_process
) -> None:
    """``bench run`` of every arm on one seed (a finished run of the same arm and seed is reused).

    Seeds are the outer loop, so a proof cut short holds whole seeds, each with every arm.

    Raises:
        RuntimeError: If a run fails.
    """
    for arm in arms:
        marker = out / "done" / f"{arm.label.replace('/', '-')}-{seed}.json"
        if marker.exists():
            arm.summaries[seed] = json.loads(marker.read_text())
            continue
        cmd = [
            "run", "--agent", arm.agent, "--env", args.env, "--seed", str(seed),
            "--advisor-model", arm.advisor_model, "--implementer-model", args.implementer_model,
            "--max-evaluations", str(args.max_evaluations), "--workers", str(args.workers),
            "--agent-config", json.dumps(arm.config), "--results-dir", str(out / "results"),
            "--leaderboard-dir", str(out / "leaderboards"), "--no-progress",
        ]  # fmt: skip
        started = time.monotonic()
        proc = runner(cmd, env={"PYTHONWARNINGS": "ignore"})
        wall = time.monotonic() - started
        if proc.returncode != 0:
            raise RuntimeError(f"bench {' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
        run_dir = Path(proc.stdout.strip().split("results in ")[-1].split()[0])
        info = json.loads((run_dir / "run.json").read_text())
        summary = dict(info.get("agent_summary") or {})
        summary["wall_s"] = round(wall, 1)  # the whole run: model load, search, training, probe
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(json.dumps(summary))
        arm.summaries[seed] = summary


def arm_label(agent: str, config: Mapping[str, Any], advisor: str = "", llm: str = "") -> str:
    """The arm a leaderboard row belongs to, from its agent, resolved configuration and advisor
    model (``models_json``'s ``advisor``, e.g. ``policy:smollm2-135m``)."""
    if config.get("advisor_rule", "policy") != "policy":
        return str(config["advisor_rule"])
    side = "frozen" if config.get("lr") == 0 else "trained"
    if llm and advisor.removeprefix("policy:") == llm:
        return f"{agent}/{llm_short(llm)}/{side}"
    return f"{agent}/{side}"


def identities(out: Path, env: str, labels: Sequence[str], llm: str = "") -> dict[str, str]:
    """Arm label -> ``<agent>@<cfg>`` of its runs on ``env``.

    Raises:
        RuntimeError: If the leaderboard does not hold exactly one identity of each arm.
    """
    import pandas as pd

    from harness.compare.identity import IDENTITY_COLUMN, with_identity
    from harness.envs.registry import default_registry

    family = default_registry().get(env).family
    lb = with_identity(pd.read_parquet(out / "leaderboards" / f"{family}.parquet"))
    found: dict[str, set[str]] = {label: set() for label in labels}
    for _, row in lb[lb["variant"] == env].iterrows():
        advisor = str(json.loads(row["models_json"] or "{}").get("advisor", ""))
        label = arm_label(str(row["agent"]), json.loads(row["agent_config_json"]), advisor, llm)
        if label in found:
            found[label].add(str(row[IDENTITY_COLUMN]))
    if any(len(v) != 1 for v in found.values()):
        raise RuntimeError(f"expected one identity per arm, found {found}")
    return {k: next(iter(v)) for k, v in found.items()}


def compare(out: Path, env: str, ids: Mapping[str, str], resamples: int) -> dict[str, Any]:
    """ONE ``bench compare --json`` over every arm (Holm per metric across all pairs), and its table.

    Raises:
        RuntimeError: If compare fails.
    """
    cmd = [
        *_bench(), "compare", "--env", env, "--agents", *(f"{i}={label}" for label, i in ids.items()),
        "--leaderboard-dir", str(out / "leaderboards"), "--results-dir", str(out / "results"),
        "--resamples", str(resamples), "--json",
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bench compare failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    text_cmd = [c for c in cmd if c != "--json"]
    table = subprocess.run(text_cmd, capture_output=True, text=True).stdout
    return {"json": json.loads(proc.stdout), "table": table, "command": " ".join(text_cmd)}


def quarter_means(arm: Arm) -> tuple[float, float]:
    """Mean over seeds of the first- and last-quarter mean step reward."""
    runs = arm.summaries.values()
    firsts = [s["reward_first_quarter"] for s in runs if "reward_first_quarter" in s]
    lasts = [s["reward_last_quarter"] for s in runs if "reward_last_quarter" in s]
    return (
        statistics.fmean(firsts) if firsts else float("nan"),
        statistics.fmean(lasts) if lasts else float("nan"),
    )


def run_facts(summary: Mapping[str, Any]) -> dict[str, Any]:
    """What the report lists per run: wall time, adapter updates, parse rate per stage, probe."""
    probe = summary.get("policy_probe") or {}
    return {
        "wall_s": summary.get("wall_s"),
        "adapter_version": summary.get("adapter_version"),
        "skipped_updates": summary.get("skipped_updates"),
        "parse_rate": summary.get("parse_rate"),
        "separation": probe.get("separation") if isinstance(probe, Mapping) else None,
        "reward_quarters": [summary.get("reward_first_quarter"), summary.get("reward_last_quarter")],
    }


def departures(args: argparse.Namespace) -> list[str]:
    """The settings in which ``args`` differ from :data:`PLAN` (empty: the registered proof)."""
    out = []
    for f in dataclasses.fields(Plan):
        value = getattr(args, f.name)
        value = tuple(value) if isinstance(value, list) else value
        if value != getattr(PLAN, f.name):
            out.append(f"{f.name}={value!r} (plan: {getattr(PLAN, f.name)!r})")
    return out


def prove(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Run every arm on every seed, then compare them all at once.

    Returns:
        ``json`` and ``table`` of the one comparison, its ``command``, ``quarters`` (arm label ->
        mean first- and last-quarter step reward), ``plan`` and ``departures`` from it.
    """
    arms = arms_of(args)
    lanes = max(1, min(args.lanes, len(args.seeds)))
    with contextlib.ExitStack() as stack:
        runners: list[Runner] = [fresh_process] * lanes
        if args.preload:
            from evobench.cli.preloaded import PreloadedBench

            runners = [stack.enter_context(PreloadedBench()).run for _ in range(lanes)]

        def lane(i: int) -> None:  # seeds i, i + lanes, ...: each lane its own runner (one fork server)
            for seed in args.seeds[i::lanes]:
                run_seed(arms, seed, args, out, runners[i])

        with concurrent.futures.ThreadPoolExecutor(lanes) as pool:
            for f in [pool.submit(lane, i) for i in range(lanes)]:
                f.result()
    ids = identities(out, args.env, [a.label for a in arms], args.llm_advisor)
    report = compare(out, args.env, ids, args.resamples)
    report["quarters"] = {a.label: quarter_means(a) for a in arms}
    report["runs"] = {
        a.label: {seed: run_facts(a.summaries[seed]) for seed in sorted(a.summaries)} for a in arms
    }
    report["plan"] = dataclasses.asdict(PLAN)
    report["departures"] = departures(args)
    return report


def focus(report: Mapping[str, Any]) -> list[str]:
    """The pairs the proof is about (each preset trained vs frozen, trained vs the bandit), one line
    each, with the p-values Holm-adjusted over ALL pairs of the comparison."""
    wanted = {}
    for label in report["quarters"]:
        base, _, side = label.rpartition("/")
        if side == "trained":
            wanted[(label, f"{base}/frozen")] = True
            wanted[(label, BANDIT)] = True
    lines = []
    for r in report["json"]["paired"]:
        pair = (r["agent_a"], r["agent_b"])
        if (pair in wanted or pair[::-1] in wanted) and r["metric"] in ("u", "auc"):
            ci = "no CI" if r.get("ci_lo") is None else f"[{r['ci_lo']:.3f}, {r['ci_hi']:.3f}]"
            lines.append(
                f"{r['agent_a']} - {r['agent_b']} {r['metric']}: {r['delta']:+.3f} {ci}, "
                f"p {r['p_value']:.3g}, Holm {r['p_holm']:.3g}"
            )
    return lines


def parser() -> argparse.ArgumentParser:
    """Command-line options (defaults: :data:`PLAN`)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", default=PLAN.env)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(PLAN.seeds))
    ap.add_argument("--max-evaluations", type=int, default=PLAN.max_evaluations)
    ap.add_argument("--presets", nargs="*", default=list(PLAN.presets))
    ap.add_argument(
        "--bandit", action=argparse.BooleanOptionalAction, default=PLAN.bandit, help="the bandit-ucb arm"
    )
    ap.add_argument("--advisor-model", default=PLAN.advisor_model)
    ap.add_argument("--implementer-model", default=PLAN.implementer_model)
    ap.add_argument(
        "--agent-config", default=PLAN.agent_config, help="JSON added to every arm's configuration"
    )
    ap.add_argument("--fast", action=argparse.BooleanOptionalAction, default=PLAN.fast, help=f"add {FAST}")
    ap.add_argument("--resamples", type=int, default=PLAN.resamples)
    ap.add_argument("--llm-advisor", default=PLAN.llm_advisor, help='real-LLM advisor arms ("": none)')
    ap.add_argument("--llm-presets", nargs="*", default=list(PLAN.llm_presets))
    ap.add_argument("--llm-config", default=PLAN.llm_config, help="JSON added to the LLM arms only")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument(
        "--lanes",
        type=int,
        default=2,
        help="runs at once (each seed's arms in turn; the plan's policy_threads 1 keeps a run to one core)",
    )
    ap.add_argument(
        "--preload",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="fork runs from one preloaded process",
    )
    ap.add_argument("--out", type=Path, help="scratch directory (kept; finished runs are reused)")
    ap.add_argument("--json", type=Path, help="also write the report here")
    return ap


def main() -> None:
    args = parser().parse_args()
    import tempfile

    out = args.out or Path(tempfile.mkdtemp(prefix="evobench-proof-"))
    report = prove(args, out)
    seeds = " ".join(map(str, args.seeds))
    print(f"== {args.env}, seeds {seeds}, {args.max_evaluations} evaluations, advisor {args.advisor_model}")
    if report["departures"]:
        print("EXPLORATORY: differs from the registered plan in " + "; ".join(report["departures"]))
    for label, (first, last) in report["quarters"].items():
        print(f"mean step reward, first -> last quarter: {label} {first:.3f} -> {last:.3f}")
    for label, runs in report["runs"].items():
        for seed, facts in runs.items():
            print(f"run {label} seed {seed}: {json.dumps(facts, default=str)}")
    print(report["command"])
    print(report["table"])
    print("pairs of interest (p Holm-adjusted over every pair above):")
    print("\n".join(focus(report)))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    print(f"runs in {out}")


if __name__ == "__main__":
    main()
