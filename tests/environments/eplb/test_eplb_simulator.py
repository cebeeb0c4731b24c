"""The EPLB load simulator: vectorised == per-expert loop, and a hand-computed case."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from environments.eplb.simulate import balancedness, gpu_loads, simulate, simulate_loop


def random_placement(
    gen: torch.Generator, layers: int, experts: int, slots: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A random valid placement: every expert >= 1 replica, every slot used exactly once."""
    phy2log = torch.empty(layers, slots, dtype=torch.int64)
    for layer in range(layers):
        extra = torch.randint(0, experts, (slots - experts,), generator=gen)
        owners = torch.cat([torch.arange(experts), extra])
        phy2log[layer] = owners[torch.randperm(slots, generator=gen)]
    logcnt = torch.stack([torch.bincount(row, minlength=experts) for row in phy2log])
    width = int(logcnt.max()) + int(torch.randint(0, 3, (1,), generator=gen))
    log2phy = torch.full((layers, experts, width), -1, dtype=torch.int64)
    for layer in range(layers):
        for e in range(experts):
            slots_of_e = (phy2log[layer] == e).nonzero().flatten()
            slots_of_e = slots_of_e[torch.randperm(len(slots_of_e), generator=gen)]
            log2phy[layer, e, : len(slots_of_e)] = slots_of_e
    return phy2log, log2phy, logcnt


@settings(max_examples=60, deadline=None)
@given(
    layers=st.integers(1, 4),
    experts=st.integers(1, 12),
    spare=st.integers(0, 10),
    gpus=st.sampled_from([1, 2, 3, 4]),
    seed=st.integers(0, 2**31 - 1),
    zero_fraction=st.sampled_from([0.0, 0.3, 1.0]),
)
def test_vectorised_matches_loop(
    layers: int, experts: int, spare: int, gpus: int, seed: int, zero_fraction: float
) -> None:
    gen = torch.Generator().manual_seed(seed)
    slots = experts + spare
    slots += (-slots) % gpus  # R must be a multiple of G
    _, log2phy, logcnt = random_placement(gen, layers, experts, slots)
    load = torch.randint(0, 1000, (layers, experts), generator=gen).double()
    load[torch.rand(layers, experts, generator=gen) < zero_fraction] = 0
    fast = simulate(log2phy, logcnt, load, slots, gpus)
    slow = simulate_loop(log2phy, logcnt, load, slots, gpus)
    # Each slot receives exactly one share in a valid placement, so slot loads agree bit for bit.
    assert torch.equal(fast.slot_load, slow.slot_load)
    assert fast.expert == pytest.approx(slow.expert, rel=1e-12, abs=1e-15)
    assert fast.gpu == pytest.approx(slow.gpu, rel=1e-12, abs=1e-15)
    assert 0.0 < fast.expert <= 1.0 + 1e-12
    assert fast.expert <= fast.gpu + 1e-12  # summing slots into GPUs can only even things out
    # Load is conserved.
    assert fast.slot_load.sum().item() == pytest.approx(load.sum().item())


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), layers=st.integers(1, 3), experts=st.integers(1, 6))
def test_vectorised_matches_loop_on_arbitrary_ids(seed: int, layers: int, experts: int) -> None:
    """Outside the validity rules (duplicates, zero counts) both still agree up to rounding."""
    gen = torch.Generator().manual_seed(seed)
    slots, width = 8, 4
    logcnt = torch.randint(0, width + 1, (layers, experts), generator=gen)
    log2phy = torch.randint(0, slots, (layers, experts, width), generator=gen)
    load = torch.rand(layers, experts, generator=gen) * 100
    fast = simulate(log2phy, logcnt, load, slots, 2)
    slow = simulate_loop(log2phy, logcnt, load, slots, 2)
    torch.testing.assert_close(fast.slot_load, slow.slot_load, rtol=1e-12, atol=1e-9)
    assert fast.expert == pytest.approx(slow.expert, rel=1e-9)
    assert fast.gpu == pytest.approx(slow.gpu, rel=1e-9)


def test_hand_computed_case() -> None:
    # One layer, 3 experts, 4 slots on 2 GPUs (slots 0-1 -> GPU 0, 2-3 -> GPU 1).
    # Expert 0 has two replicas (slots 0 and 3), experts 1 and 2 one each (slots 1 and 2).
    log2phy = torch.tensor([[[0, 3], [1, -1], [2, -1]]])
    logcnt = torch.tensor([[2, 1, 1]])
    load = torch.tensor([[60.0, 20.0, 40.0]])
    b = simulate(log2phy, logcnt, load, 4, 2)
    assert b.slot_load.tolist() == [[30.0, 20.0, 40.0, 30.0]]
    # mean 30, max 40 -> 0.75; GPUs: 50 and 70 -> mean 60 / max 70.
    assert b.expert == pytest.approx(0.75)
    assert b.gpu == pytest.approx(60.0 / 70.0)
    slow = simulate_loop(log2phy, logcnt, load, 4, 2)
    assert slow.expert == pytest.approx(0.75) and slow.gpu == pytest.approx(60.0 / 70.0)


def test_two_layers_sum_before_dividing() -> None:
    # B = (sum of layer means) / (sum of layer maxima), not the mean of per-layer ratios.
    p = torch.tensor([[1.0, 1.0], [0.0, 4.0]], dtype=torch.float64)
    assert balancedness(p) == pytest.approx((1.0 + 2.0) / (1.0 + 4.0))
    assert gpu_loads(p, 1).tolist() == [[2.0], [4.0]]


def test_all_zero_load_is_perfectly_balanced() -> None:
    log2phy = torch.tensor([[[0], [1]]])
    logcnt = torch.tensor([[1, 1]])
    b = simulate(log2phy, logcnt, torch.zeros(1, 2), 2, 1)
    assert b.expert == 1.0 and b.gpu == 1.0
    assert math.isfinite(simulate_loop(log2phy, logcnt, torch.zeros(1, 2), 2, 1).expert)


def test_gpu_count_must_divide_slots() -> None:
    with pytest.raises(ValueError):
        gpu_loads(torch.zeros(1, 5, dtype=torch.float64), 2)
