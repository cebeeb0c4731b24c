"""Trained vs frozen advisor through ``bench compare``: the CI-sized version of
``benchmarks/bench_learning_proof.py`` (pacevolve++ on ``selftest-bandit-8``, six seeds a side;
not the script's registered plan, which adds the other presets and the bandit-ucb arm).

The frozen arm is the same configuration with ``lr = 0``. Real ``bench run`` processes write a
scratch leaderboard; ``bench compare`` pairs the two identities by seed. Six seeds are the fewest for
which the exact sign-flip test can reach p < 0.05 (the smallest two-sided p-value is 2 / 2**6).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SEEDS = 6
ARGV = [
    "--env", "selftest-bandit-8", "--fast", "--implementer-model", "offline/pacevolve",
    "--presets", "pacevolve++", "--no-bandit", "--llm-advisor", "", "--seeds", *map(str, range(SEEDS)),
    "--max-evaluations", "129", "--resamples", "2000", "--agent-config", "{}",
    "--lanes", "1",  # one run at a time beside the rest of the suite, as before
]  # fmt: skip
"""The CI-sized proof: the bandit instrument, pacevolve++ trained vs frozen only (as before issue 35)."""


def _proof() -> types.ModuleType:
    path = ROOT / "benchmarks" / "bench_learning_proof.py"
    spec = importlib.util.spec_from_file_location("evobench_learning_proof", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_trained_advisor_beats_its_frozen_self_in_bench_compare(tmp_path: Path) -> None:
    proof = _proof()
    args = proof.parser().parse_args(ARGV)
    assert isinstance(args, argparse.Namespace)
    report = proof.prove(args, tmp_path)
    print(report["table"])
    assert report["departures"]  # not the registered plan: the CI-sized version
    paired = [r for r in report["json"]["paired"] if r["agent_a"] == "pacevolve++/trained"]
    by_metric = {r["metric"]: r for r in paired}
    assert {"u", "auc"} <= set(by_metric), by_metric.keys()
    for r in by_metric.values():
        assert r["n_pairs"] == SEEDS  # every seed ran on both sides
    wins = [m for m in ("u", "auc") if by_metric[m]["delta"] > 0 and by_metric[m]["p_value"] < 0.05]
    assert wins, {m: (by_metric[m]["delta"], by_metric[m]["p_value"]) for m in ("u", "auc")}
    (tf, tl), (ff, fl) = report["quarters"]["pacevolve++/trained"], report["quarters"]["pacevolve++/frozen"]
    print(f"trained {tf:.3f} -> {tl:.3f}, frozen {ff:.3f} -> {fl:.3f}")


def test_the_registered_plan_compares_every_arm_at_once() -> None:
    """The script's defaults are its plan: pacevolve++ trained and frozen with tiny-random and with
    SmolLM2, and the bandit, in one comparison."""
    proof = _proof()
    plan = proof.parser().parse_args([])
    assert proof.departures(plan) == [] and plan.env == "llm-sr-phys-osc1-tiny" and len(plan.seeds) == 8
    arms = proof.arms_of(plan)
    assert [a.label for a in arms] == [
        "pacevolve++/trained", "pacevolve++/frozen", "pacevolve++/smollm2/trained",
        "pacevolve++/smollm2/frozen", "bandit-ucb",
    ]  # fmt: skip
    llm = arms[2]
    assert llm.advisor_model == "smollm2-135m" and llm.config["max_prompt_tokens"] == 160
    assert arms[3].config["lr"] == 0.0 and "max_prompt_tokens" not in arms[1].config
    assert all(a.config["islands"] == 4 for a in arms)  # one scaffold for every arm
    rows = [
        ("maxk", {"lr": 0.1, "advisor_rule": "policy"}, "policy:tiny-random", "maxk/trained"),
        ("maxk", {"lr": 0.0, "advisor_rule": "policy"}, "policy:tiny-random", "maxk/frozen"),
        ("pacevolve++", {"lr": 0.0}, "policy:smollm2-135m", "pacevolve++/smollm2/frozen"),
        ("pacevolve++", {"lr": 0.1, "advisor_rule": "bandit-ucb"}, "policy:smollm2-135m", "bandit-ucb"),
    ]
    for agent, config, advisor, label in rows:  # how a leaderboard row is sorted into its arm
        assert proof.arm_label(agent, config, advisor, "smollm2-135m") == label
    assert proof.departures(proof.parser().parse_args(["--seeds", "0", "1"]))
