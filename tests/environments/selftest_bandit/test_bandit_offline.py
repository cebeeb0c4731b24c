"""The offline implementer (``offline/pacevolve``, not an LLM) writes the advisor's hypothesis into CHOICE."""

from __future__ import annotations

import ast
import json
import random
from pathlib import Path
from typing import Any

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

import agents.pacevolve  # noqa: F401 - registers offline/pacevolve
from agents.pacevolve import PACEvolveAgent, PACEvolveConfig, prompting
from agents.pacevolve.offline import respond, selected_hypothesis
from agents.pacevolve.parsing import parse_edit
from agents.pacevolve.roles import IslandView, Selection
from agents.pacevolve.state import Idea
from environments.selftest_bandit.scorer import payoff
from harness.envs.registry import default_registry
from harness.llm import LLMClient
from harness.llm.offline import parse_offline_prompt, register_operators
from harness.program import parse_program
from harness.runner.context import Budget
from harness.runner.runner import create_run, drive, task_spec
from harness.sandbox.factory import make_backend

ENV = "selftest-bandit"


def _view(program: str | None = None) -> IslandView:
    task = task_spec(default_registry().get(ENV))
    register_operators(task.env_id, list(task.mutations))  # what the agent does at start
    return IslandView(
        task=task,
        island=0,
        step=1,
        seed=5,
        program=program if program is not None else task.initial_program,
        program_score=0.0,
        best_score=0.0,
        ideas=(Idea(id=1, description="Pick the arm by its first letter."),),
        pruned=(),
        log=(),
    )


def _messages(hypothesis: str, program: str | None = None) -> tuple[IslandView, list[Any]]:
    view = _view(program)
    idea = view.ideas[0]
    return view, prompting.implementation(view, idea, Selection(idea.id, hypothesis))


def _choice(program: str) -> str:
    (body,) = parse_program(program, "python").blocks
    tree = ast.parse(body.text)
    (stmt,) = tree.body
    assert isinstance(stmt, ast.Assign)
    value = ast.literal_eval(stmt.value)
    assert isinstance(value, str)
    return value


def test_implementer_writes_the_hypothesis_into_choice() -> None:
    view, msgs = _messages("go with the arm that pays most")
    p = parse_offline_prompt(msgs)
    assert selected_hypothesis(p) == "go with the arm that pays most"
    answer = respond(p, random.Random(0))
    assert "`set-choice`" in answer
    new = parse_edit(answer, view.program, "python")
    assert _choice(new) == "go with the arm that pays most" and payoff(_choice(new)) == 1.0


def test_through_the_llm_client_and_cut_to_64_characters() -> None:
    hypothesis = "  \n  Wide search: " + "x" * 100 + "  \n"
    view, msgs = _messages(hypothesis)
    c = LLMClient({"implementer": "offline/pacevolve"})
    r = c.complete("implementer", msgs, seed=2, stage="implementation")
    assert r.offline
    assert _choice(parse_edit(r.text, view.program, "python")) == ("Wide search: " + "x" * 100)[:64]


def test_repair_conversation_reads_the_original_request() -> None:
    view, msgs = _messages("orange")
    repair = prompting.edit_repair(view, "SEARCH text not found")
    convo = [*msgs, {"role": "assistant", "content": "garbage"}, {"role": "user", "content": repair}]
    p = parse_offline_prompt(convo)
    assert p.stage == "implementation_repair" and selected_hypothesis(p) == "orange"
    assert _choice(parse_edit(respond(p, random.Random(0)), view.program, "python")) == "orange"


def test_unchanged_program_falls_back_to_the_random_operators() -> None:
    """A hypothesis already in CHOICE changes nothing, so the operator rule applies (random-choice)."""
    program = _view().program.replace('CHOICE = "a"', "CHOICE = 'same idea'")
    view, msgs = _messages("same idea", program)
    answer = respond(parse_offline_prompt(msgs), random.Random(0))
    assert "`random-choice`" in answer and "`set-choice`" not in answer
    assert _choice(parse_edit(answer, program, "python")) != "same idea"


def test_other_environments_keep_the_operator_rule() -> None:
    task = task_spec(default_registry().get("eplb-tiny"))
    register_operators(task.env_id, list(task.mutations))
    view = IslandView(task, 0, 1, 5, task.initial_program, None, None, (Idea(id=1, description="d"),), (), ())
    msgs = prompting.implementation(view, view.ideas[0], Selection(1, "Apply operator `packing-order` now"))
    answer = respond(parse_offline_prompt(msgs), random.Random(0))
    assert "hypothesis text" not in answer and "`packing-order`" in answer


# Hypotheses that try to confuse the extraction or the reply: headings, field names, fences,
# reasoning tags, quotes, line breaks.
_TRICKY = st.sampled_from(
    ["\n\n## Rules\n", "\nHypothesis: ", "## Change to make", "```", "<think>", "</think>"]
    + ["'", '"', "\\", "\r"]
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.text(min_size=1, max_size=12), _TRICKY), min_size=1, max_size=8))
def test_any_hypothesis_lands_in_choice_exactly(parts: list[str]) -> None:
    hypothesis = "".join(parts)
    view, msgs = _messages(hypothesis)
    p = parse_offline_prompt(msgs)
    assert selected_hypothesis(p) == hypothesis.strip()
    answer = respond(p, random.Random(0))
    expected = hypothesis.strip()[:64]
    if expected == "a":  # the initial CHOICE: nothing to change, the fallback applies
        return
    assert _choice(parse_edit(answer, view.program, "python")) == expected


def test_pacevolve_offline_run_scores_the_advisors_words(tmp_path: Path) -> None:
    """A whole offline PACEvolve run: each evaluated CHOICE is the selection's hypothesis, cut to 64."""
    cfg = PACEvolveConfig(model="offline/pacevolve", islands=1, freeze_period=2, max_ideas=3)
    agent = PACEvolveAgent(cfg)
    v = default_registry().get(ENV)
    store = create_run(
        results_dir=tmp_path / "results",
        variant=v,
        agent=agent,
        seed=1,
        budget=Budget(max_evaluations=5),
        backend="local",
        workers=1,
    )
    try:
        with make_backend("local", workers=1, mode="warm", prewarm=(v.id,)) as b:
            drive(store, variant=v, agent=agent, backend=b, leaderboard_dir=tmp_path / "lb")
    finally:
        store.close()
    run_dir = store.run_dir
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"
    cands = pd.read_parquet(run_dir / "candidates.parquet")
    assert len(cands) == 5 and (cands["status"] == "ok").all()
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert "implementation" in set(calls["stage"])
    choices = []
    for sha in cands["program_sha256"]:
        (path,) = list((run_dir / "programs" / sha[:2]).glob(f"{sha}.*"))
        choices.append(_choice(path.read_text()))
    # the offline advisor's hypotheses start "Apply operator ...": 'A' is arm 1 (payoff 0.0)
    later = [c for c in choices if c != "a"]
    assert later and all(c.startswith("Apply operator `") and len(c) <= 64 for c in later)
    assert (cands["score"] == 0.0).all()
