"""The offline proposer as a litellm provider: prompt convention, labelling, determinism, operator edits."""

from __future__ import annotations

import random
from typing import Any

import pytest

from harness.llm import KIND_OFFLINE, LLMCallFailed, LLMClient, litellm_module
from harness.llm.offline import (
    FINGERPRINT,
    OfflinePrompt,
    answer,
    code_blocks,
    fenced,
    operators_for,
    parse_offline_prompt,
    propose_edit,
    register_offline_proposer,
    register_operators,
)
from harness.program import ReplaceSnippet, apply_edit, parse_diff

PROGRAM = "import math\n\n# EVOLVE-BLOCK-START\ndef f(x):\n    s = '```'\n    return 2.5 * x + 1\n"
PROGRAM += "# EVOLVE-BLOCK-END\n"


def echo(prompt: OfflinePrompt, rng: random.Random) -> str:
    program = prompt.program("current program") or ""
    n = prompt.number("ideas requested", 0)
    return f"stage={prompt.stage} env={prompt.env_id} n={n} r={rng.random()} len={len(program)}"


def user(stage: str = "idea_generation") -> str:
    return (
        f"Stage: {stage}\nEnvironment: unit-tiny\nLanguage: python\nIdeas requested: 3\n\n"
        f"## Task\nDo things.\n\n## Current program\n{fenced(PROGRAM, 'python')}\n\n## Idea pool\n(empty)\n"
    )


def test_prompt_convention_round_trips_programs_with_backticks() -> None:
    p = parse_offline_prompt([{"role": "system", "content": "sys"}, {"role": "user", "content": user()}])
    assert (p.stage, p.env_id, p.language, p.number("ideas requested", 0)) == (
        "idea_generation",
        "unit-tiny",
        "python",
        3,
    )
    assert set(p.sections) == {"task", "current program", "idea pool"}
    assert p.program("current program") == PROGRAM
    assert code_blocks(fenced(PROGRAM, "python")) == [("python", PROGRAM)]
    repair = parse_offline_prompt(
        [{"role": "user", "content": user()}, {"role": "assistant", "content": "x"},
         {"role": "user", "content": "Stage: implementation_repair\n\n## Problem\nbad"}]
    )  # fmt: skip
    assert repair.stage == "implementation_repair" and repair.program("current program") == PROGRAM
    assert parse_offline_prompt([{"role": "user", "content": "no header here"}]).stage == ""


def test_offline_model_through_litellm_is_labelled_and_deterministic() -> None:
    register_offline_proposer("echo", echo)
    litellm = litellm_module()
    msgs: list[dict[str, Any]] = [{"role": "user", "content": user()}]
    a = litellm.completion(model="offline/echo", messages=msgs, seed=1)
    b = litellm.completion(model="offline/echo", messages=msgs, seed=1)
    c = litellm.completion(model="offline/echo", messages=msgs, seed=2)
    text = a.choices[0].message.content
    assert text.startswith("stage=idea_generation env=unit-tiny n=3") and f"len={len(PROGRAM)}" in text
    assert text == b.choices[0].message.content != c.choices[0].message.content
    assert a.model == "offline/echo" and a.system_fingerprint == FINGERPRINT
    assert a._hidden_params["not_an_llm"] is True and a.usage.prompt_tokens > 0


def test_client_records_offline_calls_as_not_an_llm() -> None:
    register_offline_proposer("echo", echo)
    c = LLMClient({"advisor": "offline/echo", "implementer": "offline/nobody"})
    r = c.complete("advisor", [{"role": "user", "content": user()}], seed=3)
    assert r.offline and r.cost_usd == 0.0 and r.response_model == "offline/echo"
    assert c.ledger.rows()[0].kind == KIND_OFFLINE
    with pytest.raises(LLMCallFailed, match="no offline proposer named 'nobody'"):
        c.complete("implementer", [{"role": "user", "content": user()}])


def test_operator_side_channel_and_edits() -> None:
    assert [op.name for op in operators_for("unregistered")] == ["perturb_numeric_literal", "swap_comparison"]
    register_operators("unit-tiny", [ReplaceSnippet("slope", "2.5 * x", ["3.5 * x"])])
    ops = operators_for("unit-tiny")
    assert [op.name for op in ops] == ["slope", "perturb_numeric_literal", "swap_comparison"]
    edit = propose_edit(PROGRAM, "python", random.Random(0), ops, prefer="slope")
    assert edit is not None and edit.operators == ("slope",) and "3.5 * x" in edit.program
    assert apply_edit(PROGRAM, parse_diff(edit.diff), "python") == edit.program
    assert propose_edit("# EVOLVE-BLOCK-START\n# EVOLVE-BLOCK-END\n", "python", random.Random(0), ops) is None


def test_the_request_temperature_reaches_the_proposer_without_changing_its_generator() -> None:
    def temp(p: OfflinePrompt, rng: random.Random) -> str:
        return f"{p.temperature} {rng.random()}"

    register_offline_proposer("temp", temp)
    litellm = litellm_module()
    msgs = [{"role": "user", "content": "Stage: idea_generation\n\nhello"}]
    hot = litellm.completion(model="offline/temp", messages=msgs, seed=1, temperature=0.7)
    cold = litellm.completion(model="offline/temp", messages=msgs, seed=1, temperature=0.0)
    t_hot, r_hot = hot.choices[0].message.content.split()
    t_cold, r_cold = cold.choices[0].message.content.split()
    assert (float(t_hot), float(t_cold)) == (0.7, 0.0) and r_hot == r_cold
    assert answer("temp", msgs, 1).split()[0] == "None"  # not given: None


def test_the_client_answers_offline_without_litellm_exactly_as_litellm_does() -> None:
    """``LLMClient`` answers ``offline/<name>`` directly (no ~7 s litellm import in a process that
    needs no LLM); the answer, labels and token estimates equal litellm's provider route."""
    import subprocess
    import sys

    register_offline_proposer("echo-direct", echo)
    msgs: list[Any] = [{"role": "user", "content": user()}]
    via = litellm_module().completion(model="offline/echo-direct", messages=msgs, seed=5, temperature=0.3)
    client = LLMClient({"implementer": "offline/echo-direct"})
    client.check_environment()  # no key to check: nothing imported
    r = client.complete("implementer", msgs, seed=5, temperature=0.3)
    assert r.text == via.choices[0].message.content and r.offline and r.cost_usd == 0.0
    assert (r.tokens_in, r.tokens_out) == (via.usage.prompt_tokens, via.usage.completion_tokens)
    assert r.response_model == via.model == "offline/echo-direct"
    assert client.ledger.rows()[-1].kind == KIND_OFFLINE
    # In a fresh process: a whole offline request leaves litellm unimported.
    code = (
        "import sys, random\n"
        "from harness.llm import LLMClient\n"
        "from harness.llm.offline import register_offline_proposer\n"
        "register_offline_proposer('x', lambda p, rng: 'hi ' + str(rng.random()))\n"
        "c = LLMClient({'implementer': 'offline/x'}); c.check_environment()\n"
        "r = c.complete('implementer', [{'role': 'user', 'content': 'q'}], seed=1)\n"
        "assert r.text.startswith('hi ')\n"
        "print('litellm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False", out.stderr[-2000:]
    with pytest.raises(LLMCallFailed, match="no offline proposer named 'nobody'"):
        LLMClient({"implementer": "offline/nobody"}).complete("implementer", msgs, seed=1)
