"""Exact GPU model matching and the scorer's GPU = its worker slot's GPU (issue 21 items 8, minor)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.evaluation.errors import InfraError
from harness.hardware.gpus import assign
from harness.scoring.device import choose_device, gpu_matches, slot_cuda_index

# What real cards report through torch.cuda.get_device_name / nvidia-smi --query-gpu=name.
REAL_NAMES = {
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA H100 PCIe": "H100",
    "NVIDIA H100 NVL": "H100",
    "NVIDIA H200": "H200",
    "NVIDIA H200 NVL": "H200",
    "NVIDIA GH200 480GB": "GH200",
    "NVIDIA A100-SXM4-80GB": "A100",
    "NVIDIA A100-SXM4-40GB": "A100",
    "NVIDIA A100 80GB PCIe": "A100",
    "NVIDIA A100-PCIE-40GB": "A100",
    "NVIDIA RTX A1000": "A1000",
    "NVIDIA A10": "A10",
    "NVIDIA A10G": "A10G",
    "NVIDIA B200": "B200",
    "Tesla T4": "T4",
    "NVIDIA L40S": "L40S",
}


@pytest.mark.parametrize("name", sorted(REAL_NAMES))
@pytest.mark.parametrize("required", ["H100", "H200", "A100", "A10", "B200"])
def test_gpu_names_match_whole_model_words(name: str, required: str) -> None:
    assert gpu_matches(required, name) == (REAL_NAMES[name] == required)
    assert gpu_matches(required.lower(), name.upper()) == (REAL_NAMES[name] == required)


def test_substring_lookalikes_are_refused() -> None:
    torch = _torch(["NVIDIA GH200 480GB"])
    with pytest.raises(InfraError, match="needs an NVIDIA H200"):
        choose_device("H200", torch, env={}, pool=[0], slot=0)


def _torch(names: list[str]) -> Any:
    current: list[int] = [0]
    cuda = SimpleNamespace(
        is_available=lambda: bool(names),
        device_count=lambda: len(names),
        get_device_name=lambda i=None: names[current[0] if i is None else i],
        current_device=lambda: current[0],
        set_device=lambda i: current.__setitem__(0, i),
    )
    return SimpleNamespace(cuda=cuda, current=current)


@pytest.mark.parametrize("slot", range(6))
def test_scorer_uses_its_slots_gpu_not_gpu0(slot: int) -> None:
    names = [f"NVIDIA H100 80GB HBM3 #{i}" for i in range(4)]
    torch = _torch(names)
    d = choose_device("H100", torch, env={}, slot=slot, pool=[0, 1, 2, 3])
    assert d.index == slot % 4 == torch.current[0]  # torch's "cuda" is now the candidate's GPU
    assert d.name == names[slot % 4]


def test_visible_subset_and_container_views() -> None:
    # The harness sees host GPUs 2 and 3 only (CUDA_VISIBLE_DEVICES=2,3): slot 1 has host GPU 3,
    # which torch calls cuda:1 here; a container holding only host GPU 3 calls it cuda:0.
    assert assign(1, 1, [2, 3]) == (3,) and slot_cuda_index(1, 1, [2, 3]) == 1
    assert slot_cuda_index(1, 5, [3]) == 0
    assert slot_cuda_index(2, 1, [0, 1, 2, 3]) == 2


@given(
    st.integers(1, 4), st.integers(0, 64), st.lists(st.integers(0, 15), min_size=1, max_size=8, unique=True)
)
def test_slot_index_points_at_the_sandboxes_gpu(gpu_count: int, slot: int, pool: list[int]) -> None:
    if gpu_count > len(pool):
        with pytest.raises(InfraError):
            slot_cuda_index(gpu_count, slot, pool)
        return
    assert pool[slot_cuda_index(gpu_count, slot, pool)] == assign(gpu_count, slot, pool)[0]


def test_slot_beyond_visible_gpus_is_infra() -> None:
    with pytest.raises(InfraError, match="CUDA sees 1"):
        choose_device("H100", _torch(["NVIDIA H100 PCIe"]), env={}, slot=1, pool=[0, 1])
