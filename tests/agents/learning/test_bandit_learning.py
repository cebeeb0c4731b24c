"""Every preset learns on the bandit instrument at its default (``cpu``) learning settings.

``selftest-bandit-8``: each of the first eight characters of the hypothesis the advisor writes
picks an arm (the offline implementer writes it into ``CHOICE``), so the reward depends only on what
the policy expresses. Only budget knobs differ from the defaults (shorter prompts and answers, for
speed); learning rate, LoRA targets, estimators and clipping are each preset's ``cpu`` settings, and
the policy's thread count is the configured default (``policy_threads``). A seeded run is
deterministic; the spread over seeds is measured by ``benchmarks/bench_learning_proof.py``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agents.registry import get_agent_class

STEPS = 16
ISLANDS = 8
BUDGET_KNOBS = {
    "advisor_model": "tiny-random",
    "implementer_model": "offline/pacevolve",
    "device": "cpu",  # the cpu settings on any machine
    "policy_max_new_tokens": 16,
    "max_prompt_tokens": 128,
    "backtracking": False,
    "skip_repeats": False,  # converging on the best arm repeats hypotheses; that is the point here
    # The arms are the answer's first characters; on the byte-level policy a 16-token answer cannot
    # finish a format (``Idea ID: 1\nHypothesis: `` alone is 23 bytes), so this instrument decodes free.
    "constrained_decoding": False,
    "batch_policy_calls": False,
}
MARGIN = 0.5
"""Required rise of the mean step reward (on 0..5) from the first to the last quarter of the steps."""


def quarters(train: pd.DataFrame) -> tuple[float, float]:
    q = len(train) // 4
    return float(train["reward_mean"].iloc[:q].mean()), float(train["reward_mean"].iloc[-q:].mean())


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["pacevolve++", "thetaevolve", "ttt-discover", "maxk"])
def test_mean_reward_rises_on_the_bandit_at_default_settings(run_agent, agent: str) -> None:
    cls = get_agent_class(agent)
    cfg = cls.Config.model_validate(BUDGET_KNOBS)
    assert cfg.settings == "cpu"
    ag = cls(cfg)
    out, run_dir = run_agent(ag, "selftest-bandit-8", max_evaluations=1 + STEPS * ISLANDS, seed=2)
    assert out.info.status == "finished"
    train = pd.read_parquet(run_dir / "train.parquet")
    # duplicates are answered from earlier results, so a run may take a few more steps than planned
    assert list(train["step"]) == list(range(1, len(train) + 1)) and len(train) >= STEPS
    first, last = quarters(train)
    print(f"{agent}: reward first quarter {first:.3f}, last quarter {last:.3f}")
    assert last > first + MARGIN, (first, last)
    assert train["adapter_version"].iloc[-1] > 0
    if agent == "pacevolve++":  # alpha follows its linear schedule 0 -> 1 over the planned steps
        expected = np.minimum(1.0, np.arange(len(train)) / (STEPS - 1))
        np.testing.assert_allclose(train["alpha"], expected, atol=1e-12)
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert (calls["kind"] == "trainable policy").sum() >= STEPS * ISLANDS * 3
    summary = out.info.agent_summary
    assert summary["adapter_version"] == train["adapter_version"].iloc[-1]
    assert summary["reward_first_quarter"] == pytest.approx(first)
    assert summary["reward_last_quarter"] == pytest.approx(last)
