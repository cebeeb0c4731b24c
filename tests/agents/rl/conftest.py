import pytest

from agents.rl.backends.hf import HFBackend, LoraSettings, OptimSettings
from agents.rl.loss import LossConfig
from agents.rl.policy import tiny_random


@pytest.fixture
def make_backend():
    def make(lr=0.05, loss=None, micro_batch=8, seed=0, r=4):
        return HFBackend(
            tiny_random(seed=seed),
            lora=LoraSettings(r=r, alpha=2 * r),
            optim=OptimSettings(lr=lr, micro_batch=micro_batch),
            loss=loss or LossConfig(),
            seed=seed,
        )

    return make
