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


@pytest.fixture(autouse=True)
def _one_torch_thread():
    # Tiny matmuls are dominated by intra-op thread hand-offs (10x slower on a busy machine).
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
