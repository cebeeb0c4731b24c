"""The PACE agent's two timescales, gate, rollback and safety gates on an in-memory context.

The context scores programs with the toy scorer; validation-subset evaluations give the gate's
candidate 1.0 and its incumbent 0.0 (so the gate accepts), and ``second_full`` sets what a
repeated full evaluation of a program returns (the post-commit check's "later full evaluation").
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from agents.pace import PACEAgent, PACEConfig
from agents.pace import offline as pace_offline
from harness.envs.subset import SubsetRequest
from harness.evaluation.result import EvalResult, Status, program_sha256
from harness.runner.context import BudgetExhausted, Evaluated, Proposal

CFG: dict[str, Any] = {"model": "offline/pacevolve", "islands": 3, "cache": "off", "max_ideas": 2}


@pytest.fixture
def ctx_factory(fake_ctx: Any, task_factory: Any, tmp_path: Path) -> Any:
    base_task = dataclasses.replace(
        task_factory(maximize=True, y_init=0.0, y_target=1.0), subset_unit="points"
    )

    class SubsetContext(fake_ctx):  # type: ignore[misc, valid-type]
        def __init__(self, max_evaluations: int, second_full: float | None, subsets: bool = True) -> None:
            task = base_task if subsets else dataclasses.replace(base_task, subset_unit="")
            super().__init__(task, max_evaluations, run_dir=tmp_path / "run")
            self.second_full = second_full
            self.full_seen: set[str] = set()
            self.subsets: list[SubsetRequest | None] = []

        def evaluate(
            self, proposals: Sequence[Proposal], *, subset: SubsetRequest | None = None
        ) -> list[Evaluated]:
            if self.out_of_budget():
                raise BudgetExhausted("budget exhausted")
            batch = list(proposals)[: self.remaining_evaluations]
            if subset is None and not any(p.meta.get("pace") for p in batch):
                for p in batch:
                    self.full_seen.add(program_sha256(p.source))
                return super().evaluate(batch)
            out = []
            for p in batch:
                role = p.meta.get("pace", "")
                if subset is not None or role.startswith("gate"):
                    self.subsets.append(subset)
                    score = 0.0 if role == "gate-incumbent" else 1.0
                    env = "unit-tiny" + (subset.to_id_suffix() if subset is not None else "")
                else:  # the post-commit full evaluation
                    score = self.second_full if self.second_full is not None else 0.0
                    env = "unit-tiny"
                res = EvalResult(status=Status.OK, score=score, env_id=env, env_version="1", env_hash="h",
                                 program_sha256=program_sha256(p.source))  # fmt: skip
                ev = Evaluated(self.next_seq, p, res)
                self.next_seq += 1
                self.history.append(ev)
                out.append(ev)
            return out

    return SubsetContext


def run(agent: PACEAgent, ctx: Any) -> Any:
    try:
        agent.run(ctx)
    except BudgetExhausted:
        pass
    return ctx


def telemetry(ctx: Any) -> pd.DataFrame:
    rows = [json.loads(line) for line in (ctx.run_dir / "pace.jsonl").read_text().splitlines()]
    return pd.DataFrame(rows)


def test_saturated_round_goes_slow_and_the_gate_accepts_then_rolls_back(ctx_factory: Any) -> None:
    agent = PACEAgent(PACEConfig(**CFG, epsilon=1.0, max_slow_attempts=1))
    ctx = run(agent, ctx_factory(14, second_full=0.0))
    t = telemetry(ctx)
    events = list(t["event"])
    assert events[:2] == ["prompt_round", "saturation"] and bool(t["saturated"].iloc[1])
    gates = t[t["event"] == "gate"]
    # The others had no scored candidate under C', or the budget ended before their evaluations.
    reached = gates[(gates["subset"] != "") & gates["u_new"].notna()]
    assert len(reached) >= 1 and reached["accepted"].all()  # subset: candidate 1.0 vs incumbent 0.0
    assert all(s is not None and s.size >= 1 for s in ctx.subsets)
    drawn = {f"{s.seed}-{s.size}" for s in ctx.subsets if s is not None}
    assert set(reached["subset"]) <= drawn == set(gates[gates["subset"] != ""]["subset"])
    assert "rollback" in events and "commit" not in events  # the later full evaluation dropped to 0
    summary = agent.run_summary()
    assert summary["rollbacks"] == summary["gate_accepted"] >= 1
    defaults = {k: getattr(PACEConfig(**CFG), k) for k in summary["control"]}
    assert summary["control"] == defaults  # every committed edit was rolled back
    # fast again after the slow step
    first_gate = gates.index[0]
    assert "prompt_round" in list(t["event"].iloc[first_gate:])


def test_commit_keeps_the_edit_and_returns_to_the_fast_timescale(ctx_factory: Any) -> None:
    agent = PACEAgent(PACEConfig(**CFG, epsilon=1.0))
    ctx = run(agent, ctx_factory(10, second_full=1.0))
    t = telemetry(ctx)
    commit = t[t["event"] == "commit"]
    assert len(commit) >= 1
    edit = json.loads(t[t["event"] == "control_edit"]["edit_json"].iloc[0])
    first_commit_control = json.loads(commit["control_json"].iloc[0])
    for k, v in edit["set"].items():
        assert first_commit_control[k] == v
    after = t.loc[commit.index[0] + 1 :, "timescale"]
    assert after.empty or after.iloc[0] == "fast"
    assert agent.cfg.model_dump()["max_fix_attempts"] == agent.pace.control["max_fix_attempts"]


def test_gate_without_subsets_compares_full_evaluations(ctx_factory: Any) -> None:
    agent = PACEAgent(PACEConfig(**CFG, epsilon=1.0, max_slow_attempts=1))
    ctx = run(agent, ctx_factory(10, second_full=1.0, subsets=False))
    t = telemetry(ctx)
    assert set(t[t["event"] == "gate"]["subset"]) == {"full"}
    assert ctx.subsets and all(s is None for s in ctx.subsets)


def test_no_saturation_keeps_the_fast_timescale(ctx_factory: Any) -> None:
    agent = PACEAgent(PACEConfig(**CFG, epsilon=0.0, saturation_rule="lt"))
    ctx = run(agent, ctx_factory(12, second_full=1.0))
    t = telemetry(ctx)
    assert set(t["timescale"]) == {"fast"} and not t["saturated"].dropna().any()
    assert agent.pace.rounds >= 3


def test_immutable_edit_is_rejected_before_any_evaluation(
    ctx_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        pace_offline.pacevolve_offline.HANDLERS,
        "pace_control_edit",
        lambda p, rng: '{"set": {"islands": 64, "max_attempts": 2}, "directive": "x"}',
    )
    agent = PACEAgent(PACEConfig(**CFG, epsilon=1.0, max_slow_attempts=2, max_empty_steps=4))
    ctx = run(agent, ctx_factory(12, second_full=1.0))
    t = telemetry(ctx)
    edits = t[t["event"] == "control_edit"]
    assert len(edits) >= 2 and not edits["accepted"].any()
    assert edits["reason"].str.contains("ImmutableFieldError: 'islands' is an immutable").all()
    assert "gate" not in set(t["event"]) and not ctx.subsets
    assert "return_fast" in set(t["event"])
    assert agent.cfg.islands == 3 and agent.pace.control["max_attempts"] == PACEConfig().max_attempts


def test_safety_gate_blocks_forbidden_programs_on_the_slow_timescale(
    ctx_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agents.pacevolve import offline as pv_offline

    original = pv_offline.HANDLERS["implementation"]

    def sleepy(p: Any, rng: Any) -> str:
        text = original(p, rng)
        if "Structural change to make now" in str(p.messages[-1].get("content", "")):
            block = "import time\ndef f(x):\n    time.sleep(0)\n    return 3.5 * x + 1\n"
            return f"```python\nimport math\n\n# EVOLVE-BLOCK-START\n{block}# EVOLVE-BLOCK-END\n```"
        return text

    monkeypatch.setitem(pv_offline.HANDLERS, "implementation", sleepy)
    monkeypatch.setitem(pv_offline.HANDLERS, "implementation_repair", sleepy)
    agent = PACEAgent(PACEConfig(**CFG, epsilon=1.0, max_slow_attempts=1))
    ctx = run(agent, ctx_factory(12, second_full=1.0))
    t = telemetry(ctx)
    safety = t[t["event"] == "safety"]
    assert len(safety) >= 1 and safety["reason"].str.contains("forbidden primitive: time.sleep").all()
    assert not any("time.sleep" in ev.proposal.source for ev in ctx.history)


def test_checkpoint_carries_the_pace_state(ctx_factory: Any) -> None:
    agent = PACEAgent(PACEConfig(**CFG, epsilon=1.0))
    ctx = run(agent, ctx_factory(8, second_full=1.0))
    saved = ctx.checkpoint["state"]["pace"]
    resumed = PACEAgent(PACEConfig(**CFG, epsilon=1.0))
    resumed._restore_extra({"pace": saved})
    assert resumed.pace == agent.pace


def test_every_call_is_charged_to_a_candidate_or_still_pending(ctx_factory: Any) -> None:
    agent = PACEAgent(PACEConfig(**CFG, epsilon=1.0))
    ctx = run(agent, ctx_factory(12, second_full=1.0))
    ledger = [json.loads(line) for line in (ctx.run_dir / "llm_calls.jsonl").read_text().splitlines()]
    assert any(r["role"] == "controller" for r in ledger)
    charged = sum(ev.proposal.tokens_in for ev in ctx.history)
    pending = sum(isl.pending_tokens_in for isl in agent._state.islands)  # type: ignore[union-attr]
    assert charged + pending == sum(r["tokens_in"] for r in ledger)


def _control_runs(events: list[str]) -> list[int]:
    """Lengths of the runs of control attempts with no prompt round between them."""
    runs, n = [], 0
    for e in events:
        if e == "control_edit":
            n += 1
        elif e == "prompt_round":
            if n:
                runs.append(n)
            n = 0
    return [*runs, n] if n else runs


def test_a_prompt_round_precedes_every_control_attempt_by_default(ctx_factory: Any) -> None:
    # δ = 1: subset scores 1.0 vs 0.0 give a margin of exactly 1.0, never > δ, so every gate rejects.
    agent = PACEAgent(PACEConfig(**CFG, epsilon=1.0, delta=1.0))
    t = telemetry(run(agent, ctx_factory(16, second_full=1.0)))
    runs = _control_runs(list(t["event"]))
    assert runs and max(runs) == 1 and not t[t["event"] == "gate"]["accepted"].any()
    # The earlier behaviour (3 attempts in a row) is still available and does what it says.
    agent3 = PACEAgent(PACEConfig(**CFG, epsilon=1.0, delta=1.0, max_slow_attempts=3))
    assert max(_control_runs(list(telemetry(run(agent3, ctx_factory(16, second_full=1.0)))["event"]))) > 1


def test_saturation_compares_the_old_and_new_prompt_in_the_same_round(ctx_factory: Any) -> None:
    agent = PACEAgent(PACEConfig(**CFG, epsilon=0.0, saturation_rule="lt"))
    t = telemetry(run(agent, ctx_factory(12, second_full=1.0)))
    rounds = t[t["event"] == "prompt_round"]
    assert len(rounds) >= 2
    seen: list[float] = []
    for _, r in rounds.iterrows():
        island_u = [float(x) for x in r["island_u"].split()]  # written with 4 decimals
        seen += island_u
        assert r["u_before"] == pytest.approx(island_u[0], abs=1e-4)  # P_{t-1}: island 0 this round
        assert any(r["u_after"] == pytest.approx(u, abs=1e-4) for u in seen)  # P_t: as measured
        assert r["delta_u"] == pytest.approx(r["u_after"] - r["u_before"])
