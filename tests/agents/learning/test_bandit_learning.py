"""Every preset learns on the ``selftest-bandit`` instrument with a ``tiny-random`` advisor.

The arm is the first character of the hypothesis the advisor writes (the offline implementer
writes it into ``CHOICE``), so the reward depends only on what the policy expresses. Seeded runs;
the margin is a fraction of the measured rise (see the constants).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from agents.registry import get_agent_class

STEPS = 24
ISLANDS = 8
# Small, fast policy calls: the byte-level tiny model sees the tail of each prompt.
BASE = {
    "advisor_model": "tiny-random",
    "implementer_model": "offline/pacevolve",
    "islands": ISLANDS,
    "policy_max_new_tokens": 8,
    "max_prompt_tokens": 96,
    "lr": 0.1,
    "lora_r": 4,
    "lora_alpha": 8,
    "lora_targets": ["q_proj", "v_proj", "lm_head"],
    "micro_batch": 32,
    "backtracking": False,
    "skip_repeats": False,  # converging on the best arm repeats hypotheses; that is the point here
    # The arm is the answer's first character: a format would fix it (and 8 tokens cannot finish one).
    "constrained_decoding": False,
    # The recorded seed-3 outcomes (xfail marks) are for calls sampled one at a time; batching
    # changes float rounding and so the trajectory (batched, pacevolve++ rose 2.93 -> 4.79 at seed 3).
    "batch_policy_calls": False,
}
MARGIN = 0.25
"""Required rise of the mean reward (on 0..5) from the first to the last quarter of the steps."""


_NOT_ROBUST = (
    "issue 22 (open): learning on the bandit is not robust across seeds. With the packages installed on "
    "2026-11-24 (transformers 5.23) seed 3 falls (pacevolve++ 1.58 -> 1.08, ttt-discover 1.80 -> 1.00); "
    "pacevolve++ rose in 2 of 6 seeds (2, 5), ttt-discover in 2 of 3 (1, 5) by less than the margin. "
    "Strict: this fails once learning holds here, so the mark must then go."
)


def quarters(train: pd.DataFrame) -> tuple[float, float]:
    q = len(train) // 4
    return float(train["reward_mean"].iloc[:q].mean()), float(train["reward_mean"].iloc[-q:].mean())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("agent", "extra"),
    [
        pytest.param("pacevolve++", {}, marks=pytest.mark.xfail(strict=True, reason=_NOT_ROBUST)),
        ("thetaevolve", {}),
        pytest.param("ttt-discover", {}, marks=pytest.mark.xfail(strict=True, reason=_NOT_ROBUST)),
        ("maxk", {}),
    ],
)
def test_mean_reward_rises_on_the_bandit(run_agent, agent: str, extra: dict) -> None:
    import torch

    torch.set_num_threads(1)
    cls = get_agent_class(agent)
    ag = cls(cls.Config.model_validate({**BASE, **extra}))
    out, run_dir = run_agent(ag, "selftest-bandit", max_evaluations=1 + STEPS * ISLANDS, seed=3)
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
