"""Lockstep batching (membership independent of thread timing) and the constrained advisor's parse rate."""

from __future__ import annotations

import random
import threading
import time

import pandas as pd
import pytest

from agents.learning.lockstep import Lockstep, run_all
from agents.learning.policy_roles import PolicyAdvisor, PolicyImplementer, PolicySampler, RolloutBuffer
from agents.pacevolve.roles import IslandView, ProposalError, Selection
from agents.pacevolve.state import Idea, PrunedIdea
from agents.rl.backends.base import Completion, SampleRequest
from agents.rl.backends.hf import HFBackend, LoraSettings
from agents.rl.policy import tiny_random
from harness.envs.registry import default_registry
from harness.runner.runner import task_spec


def _fake_batches(calls: dict[int, int], jitter_seed: int) -> list[list[int]]:
    """Run ``calls[key]`` submissions per participant with random sleeps; return the batches' keys."""
    batches: list[list[int]] = []

    def run_batch(reqs: list[SampleRequest]) -> list[Completion]:
        batches.append([r.seed for r in reqs])
        return [Completion(r.prompt_ids, (), (), "", True, 0) for r in reqs]

    lock = Lockstep(run_batch)
    rng = random.Random(jitter_seed)
    delays = {k: [rng.random() * 0.01 for _ in range(n + 1)] for k, n in calls.items()}

    def work(key: int) -> None:
        for i in range(calls[key]):
            time.sleep(delays[key][i])
            lock.submit(key, SampleRequest((1,), 1, key))
        time.sleep(delays[key][-1])
        if key == 2:
            raise RuntimeError("a draft failed")  # leaving by exception must not stall the others

    with pytest.raises(RuntimeError, match="draft failed"):
        run_all(work, sorted(calls), lambda k: k, lock)
    assert lock.batch_sizes == [len(b) for b in batches]
    return batches


def test_rounds_do_not_depend_on_thread_timing():
    calls = {0: 3, 1: 1, 2: 2, 3: 0, 4: 3}
    expected = [[0, 1, 2, 4], [0, 2, 4], [0, 4]]
    for jitter in range(4):
        assert _fake_batches(calls, jitter) == expected


def test_submit_outside_a_session_is_refused():
    lock = Lockstep(lambda reqs: [])
    with pytest.raises(RuntimeError):
        lock.submit(0, SampleRequest((1,), 1, 0))
    assert not lock.is_participant(0)


TASK = task_spec(default_registry().get("eplb-tiny"))


PRUNED = PrunedIdea(id=2, description="x", experiments=1, best=None, findings="y", step=1)


def _view(island: int = 0) -> IslandView:
    ideas = (Idea(id=1, description="Balance the hot experts."), Idea(id=4, description="Replicate more."))
    return IslandView(
        task=TASK, island=island, step=1, seed=11 + island, program=TASK.initial_program, program_score=0.0,
        best_score=0.0, ideas=ideas, pruned=(PRUNED,), log=(),
    )  # fmt: skip


@pytest.fixture(scope="module")
def sampler() -> PolicySampler:
    backend = HFBackend(tiny_random(), lora=LoraSettings(r=4, alpha=8))
    return PolicySampler(
        backend, tiny_random(), reference="tiny-random", temperature=1.0, max_prompt_tokens=96,
        buffer=RolloutBuffer(),
    )  # fmt: skip


def _advisor(sampler: PolicySampler, constrained: bool, max_new: int) -> PolicyAdvisor:
    return PolicyAdvisor(
        sampler, max_new_tokens=max_new, lenient=True, novelty_hint_pool_size=0, constrained=constrained,
        exact_edits=True,
    )  # fmt: skip


def _all_stages(adv: PolicyAdvisor) -> None:
    view = _view()
    adv.generate_ideas(view, 1)
    adv.classify_idea(view, "edit scale-literal 1 more replicas")
    sel = adv.select_hypothesis(view)
    adv.is_repeat(view, sel)
    adv.choose_pruned(view, 1)


def test_constrained_answers_parse_and_unconstrained_random_ones_do_not(sampler):
    on = _advisor(sampler, True, 200)
    _all_stages(on)
    assert on.parse_rates() == {s: 1.0 for s in on.calls} and len(on.calls) == 5
    off = _advisor(sampler, False, 40)
    _all_stages(off)
    assert max(off.parse_rates().values()) == 0.0


def test_a_constrained_answer_cut_short_is_counted_as_a_fallback(sampler):
    adv = _advisor(sampler, True, 6)  # "Hypoth": the format cannot complete
    ideas = adv.generate_ideas(_view(), 1)
    assert adv.fallbacks["idea_generation"] == 1 and adv.parse_rates()["idea_generation"] == 0.0
    assert ideas == ["Hypoth"]  # lenient: the whole (cut) answer is the idea


def test_constrained_end_to_end_edit_applies(sampler, monkeypatch):
    from agents.learning import answer_formats

    monkeypatch.setattr(answer_formats, "EDIT_SEARCH_LINES", 1)  # shorter blocks: a fast test
    monkeypatch.setattr(answer_formats, "EDIT_REPLACE_LINES", 1)
    impl = PolicyImplementer(sampler, max_new_tokens=400, constrained=True)  # bytes: the worst case fits
    view = _view()
    idea = view.ideas[0]
    applied = 0
    for island in range(4):
        v = _view(island)
        try:
            new = impl.implement(v, idea, Selection(1, "edit scale-literal 1 try it"))
        except ProposalError as e:  # a well-formed block may still change nothing
            assert "unchanged" in str(e)
            continue
        applied += new != v.program
    assert impl.calls == 4 and applied >= 3 and impl.failures == 4 - applied


def test_learning_agent_batches_the_islands_calls(run_agent):
    from agents.registry import get_agent_class

    cls = get_agent_class("pacevolve++")
    base = {
        "advisor_model": "tiny-random", "implementer_model": "offline/exact", "islands": 4,
        "policy_max_new_tokens": 48, "max_prompt_tokens": 96, "lora_r": 4, "lora_alpha": 8,
        "skip_repeats": False,
    }  # fmt: skip
    out, run_dir = run_agent(cls(cls.Config.model_validate(base)), "selftest-bandit", max_evaluations=9)
    summary = out.info.agent_summary
    assert summary["policy_batches"]["mean_size"] > 1.5  # four islands answer together
    assert summary["parse_rate"] and min(summary["parse_rate"].values()) == 1.0
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert (calls["kind"] == "trainable policy").sum() >= 8
    assert threading.active_count() < 20
