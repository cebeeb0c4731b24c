"""The learning line's policy probe: zero when nothing was trained, the sign of what training did."""

from __future__ import annotations

import pytest

from agents.learning.probe import PolicyProbe, ProbeResult
from agents.rl.backends.base import Completion
from agents.rl.backends.hf import HFBackend, LoraSettings, OptimSettings
from agents.rl.policy import tiny_random

PROMPTS = ["state one: pick an edit\n", "state two: pick an edit\n"]


def _backend(lr: float) -> HFBackend:
    return HFBackend(
        tiny_random(),
        lora=LoraSettings(r=4, alpha=8, target_modules=("lm_head",)),
        optim=OptimSettings(lr=lr),
    )


def _groups(backend: HFBackend) -> list[list[list[Completion]]]:
    """Two states, four sampled answers each (one call per candidate)."""
    groups = []
    for i, p in enumerate(PROMPTS):
        prompt = list(backend.tokenizer(p, add_special_tokens=False)["input_ids"])
        [answers] = backend.sample([prompt], 4, 6, 1.0, seed=i)
        groups.append([[c] for c in answers])
    return groups


REWARDS = [[5.0, -1.0, 2.0, -1.0], [0.0, 3.0, -1.0, 3.0]]


def _probe(groups: list[list[list[Completion]]], size: int = 16) -> PolicyProbe:
    probe = PolicyProbe(size)
    for step, (g, r) in enumerate(zip(groups, REWARDS, strict=True), start=1):
        probe.offer(step, g, r)
    return probe


def test_untrained_policy_reads_no_change() -> None:
    backend = _backend(lr=0.0)
    groups = _groups(backend)
    probe = _probe(groups)
    # a frozen run's updates (lr 0) leave the adapter at the identity
    flat = [c for g in groups for [c] in g]
    backend.update(flat, [1.0, -1.0, 0.5, -0.5, -1.0, 1.0, -1.0, 1.0], 1.0)
    result = probe.measure(backend, 1.0)
    assert isinstance(result, ProbeResult)
    assert result.answers == 8 and result.above == 4 and result.below == 4 and result.steps == (1, 2)
    assert result.shift_above == 0.0 and result.shift_below == 0.0 and result.separation == 0.0
    assert "no change (untrained)" in result.headline() and "frozen twin" in result.headline()


def test_an_untrained_flag_spends_no_forward_pass_and_reads_what_scoring_would() -> None:
    backend = _backend(lr=0.0)
    probe = _probe(_groups(backend))
    scored = probe.measure(backend, 1.0)
    calls: list[object] = []
    real = backend.score

    def counting(*a: object, **k: object) -> object:
        calls.append(a)
        return real(*a, **k)  # type: ignore[arg-type]

    backend.score = counting  # type: ignore[method-assign]
    shortcut = probe.measure(backend, 1.0, untrained=True)
    assert calls == [] and shortcut == scored


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_training_towards_the_rewards_separates_and_against_them_reverses(sign: float) -> None:
    backend = _backend(lr=0.05)
    groups = _groups(backend)
    probe = _probe(groups)
    flat = [c for g in groups for [c] in g]
    advantages = [sign * (r - sum(rs) / len(rs)) for rs in REWARDS for r in rs]
    for _ in range(3):
        backend.update(flat, advantages, 1.0)
    result = probe.measure(backend, 1.0)
    assert result is not None
    assert sign * result.separation > 0.05, result
    assert result.separation == pytest.approx(result.shift_above - result.shift_below)
    expected = "favours the better-scored" if sign > 0 else "favours the worse-scored"
    assert expected in result.headline()


def test_constant_groups_are_passed_over_and_the_size_caps_the_probe() -> None:
    backend = _backend(lr=0.0)
    groups = _groups(backend)
    probe = PolicyProbe(3)
    probe.offer(1, groups[0], [-1.0, -1.0, -1.0, -1.0])  # says nothing about which answer is better
    assert probe.answers == [] and probe.measure(backend, 1.0) is None
    probe.offer(2, groups[1], REWARDS[1])
    assert [a.step for a in probe.answers] == [2, 2, 2]
    assert [a.centred_reward for a in probe.answers] == [1.75, -1.25, 1.75]  # above and below alternate
    again = PolicyProbe(3)
    again.load_json(probe.to_json())  # the checkpoint round trip keeps the probe
    assert again.answers == probe.answers


def test_a_step_too_big_for_the_probe_still_gives_both_sides() -> None:
    """Three policy calls per candidate (the scaffold's three advisor stages) and the first candidates
    all below the mean: filling in candidate order gave only below-mean answers and no probe (a
    SmolLM2 run on llm-sr-phys-osc1-tiny said "not measured" with rewards differing at every step)."""
    backend = _backend(lr=0.0)
    [answers] = _groups(backend)[:1]
    calls = [[c[0], c[0], c[0]] for c in answers] * 2  # 8 candidates, 3 calls each
    rewards = [-1.0, -1.0, -1.0, -1.0, -1.0, 2.0, 3.0, 4.0]
    probe = PolicyProbe(16)
    probe.offer(1, calls, rewards)
    signs = [a.centred_reward > 0 for a in probe.answers]
    assert len(signs) == 16 and signs.count(True) >= 6 and signs.count(False) >= 6
    assert probe.measure(backend, 1.0) is not None


def test_a_frozen_runs_learning_line_says_no_change(run_agent) -> None:
    from agents.registry import get_agent_class

    cls = get_agent_class("pacevolve++")
    cfg = cls.Config.model_validate(
        {
            "advisor_model": "tiny-random", "implementer_model": "offline/pacevolve", "device": "cpu",
            "islands": 4, "policy_max_new_tokens": 16, "max_prompt_tokens": 96, "lr": 0.0,
            "constrained_decoding": False, "skip_repeats": False, "backtracking": False,
        }
    )  # fmt: skip
    out, _ = run_agent(cls(cfg), "selftest-bandit-8", max_evaluations=9, seed=1)
    summary = out.info.agent_summary
    probe = summary["policy_probe"]
    assert probe is not None and probe["answers"] > 0 and probe["separation"] == 0.0, probe
    progress, line = summary["headline"].split("\n")
    assert progress.startswith("search progress (no frozen reference)")
    assert line.startswith("learning (policy vs its frozen twin") and "no change (untrained)" in line
