"""The learning agent with the vLLM sampler (GPU machines with vLLM only; skipped elsewhere).

Written against vLLM's documented offline API through ``agents.rl.backends.vllm``; not run on the
CPU development machines (see agents/learning/README.md for what is untested).
"""

from __future__ import annotations

import pandas as pd
import pytest

from agents.registry import get_agent_class

pytestmark = pytest.mark.gpu


def test_pacevolve_pp_samples_through_vllm(run_agent) -> None:
    pytest.importorskip("vllm")
    cls = get_agent_class("pacevolve++")
    cfg = cls.Config.model_validate(
        {
            "advisor_model": "smollm2-135m",
            "implementer_model": "offline/pacevolve",
            "islands": 4,
            "policy_backend": "vllm",
            "max_prompt_tokens": 1024,
            "policy_max_new_tokens": 64,
            "vllm_gpu_memory_utilization": 0.3,
        }
    )
    out, run_dir = run_agent(cls(cfg), "selftest-bandit", max_evaluations=13)
    summary = out.info.agent_summary
    assert summary["sampler"] == "vllm"
    train = pd.read_parquet(run_dir / "train.parquet")
    assert len(train) >= 3
    # on-policy: right after each sync the sampler's and the learner's log-probs agree closely
    assert train["logprob_gap"].dropna().lt(1e-2).all(), train["logprob_gap"]
    versions = sorted(p.name for p in (run_dir / "policy" / "adapters").iterdir())
    assert versions, "no adapter version was published to vLLM"
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert calls.loc[calls["kind"] == "trainable policy", "model"].str.contains("@v").all()
