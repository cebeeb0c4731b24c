"""Trusted load simulator of the EPLB family: how balanced a placement is on a given workload.

A placement is described by ``log2phy`` [L, E, M] (physical slots of every logical expert, padded
with -1) and ``logcnt`` [L, E] (replica count of every expert). Under a workload ``load`` [L, E],
expert e of layer l sends ``load[l, e] / logcnt[l, e]`` to each of its first ``logcnt[l, e]``
slots. From the resulting physical slot loads p [L, R]:

* expert-level balancedness ``B_exp = sum_l mean_s p[l, s] / sum_l max_s p[l, s]``;
* GPU-level balancedness ``B_gpu``: the same ratio over GPU loads, GPU k owning the consecutive
  slots ``[k * R/G, (k + 1) * R/G)``.

Both are in (0, 1], 1 meaning perfectly even. A workload whose load is zero in every layer has no
imbalance, and is reported as 1.0.

:func:`simulate` is vectorised (array ops and one ``bincount``, no per-expert Python loop);
:func:`simulate_loop` is the plain per-expert loop kept as an executable specification for tests
and the benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Balance:
    """Outcome of simulating one placement on one workload."""

    slot_load: torch.Tensor
    """[L, R] float64 load of every physical slot."""
    expert: float
    """Expert-level (slot-level) balancedness B_exp."""
    gpu: float
    """GPU-level balancedness B_gpu."""


def _ratio(per_unit: np.ndarray) -> float:
    peak = float(per_unit.max(axis=1).sum())
    if peak <= 0.0:
        return 1.0
    return float(per_unit.sum()) / per_unit.shape[1] / peak  # sum of row means = total / width


def balancedness(per_unit: torch.Tensor) -> float:
    """``sum_l mean_u x[l, u] / sum_l max_u x[l, u]`` for a [L, U] load matrix (1.0 when all zero)."""
    return _ratio(per_unit.detach().cpu().to(torch.float64).numpy())


def gpu_loads(slot_load: torch.Tensor, num_gpus: int) -> torch.Tensor:
    """[L, G] load of every GPU from [L, R] slot loads (R/G consecutive slots per GPU)."""
    layers, slots = slot_load.shape
    if num_gpus <= 0 or slots % num_gpus:
        raise ValueError(f"{slots} slots cannot be split evenly over {num_gpus} GPUs")
    return slot_load.view(layers, num_gpus, slots // num_gpus).sum(dim=-1)


def _as_numpy(x: torch.Tensor | np.ndarray, dtype: type) -> np.ndarray:
    arr = x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else np.asarray(x)
    return arr.astype(dtype, copy=False)


def slot_loads(
    log2phy: torch.Tensor, logcnt: torch.Tensor, load: torch.Tensor, num_slots: int
) -> torch.Tensor:
    """Vectorised physical slot loads [L, R] (float64), accumulated with one ``bincount``.

    Only the first ``logcnt[l, e]`` entries of ``log2phy[l, e]`` are read (counts are clamped to
    ``[0, M]``); experts with ``logcnt == 0`` contribute nothing. Slot ids of the used entries must
    lie in ``[0, num_slots)`` (the scorer checks this first).

    The padded [L, E, M] array is mostly -1, so instead of masking all of it the used entries are
    enumerated directly: column 0 for every expert with a replica, then the few extra replicas
    (``repeat`` over the counts minus one).
    """
    layers, experts, width = log2phy.shape
    if width == 0:
        return torch.zeros(layers, num_slots, dtype=torch.float64)
    ids = _as_numpy(log2phy, np.int64)
    raw = _as_numpy(logcnt, np.int64).reshape(-1)
    share = _as_numpy(load, np.float64).reshape(-1) / np.maximum(raw, 1)
    layer_base = (np.arange(layers, dtype=np.int64) * num_slots)[:, None]
    first_slot = (ids[:, :, 0] + layer_base).reshape(-1)
    if raw.min() >= 1:
        target0, value0 = first_slot, share
    else:
        has = raw >= 1
        target0, value0 = first_slot[has], share[has]
    multi = np.flatnonzero(raw > 1)  # (layer, expert) ids with more than one replica
    extra = np.minimum(raw[multi], width) - 1
    owner = np.repeat(multi, extra)
    start = np.repeat(np.cumsum(extra) - extra, extra)
    replica = np.arange(owner.size, dtype=np.int64) - start + 1
    target1 = ids.reshape(-1)[owner * width + replica] + (owner // experts) * num_slots
    value1 = share[owner]
    out = np.bincount(
        np.concatenate([target0, target1]),
        weights=np.concatenate([value0, value1]),
        minlength=layers * num_slots,
    )
    return torch.from_numpy(out.astype(np.float64, copy=False)).view(layers, num_slots)


def simulate(
    log2phy: torch.Tensor, logcnt: torch.Tensor, load: torch.Tensor, num_slots: int, num_gpus: int
) -> Balance:
    """Vectorised simulation of a placement on a workload.

    Args:
        log2phy: [L, E, M] integer slot ids, -1 padded.
        logcnt: [L, E] integer replica counts.
        load: [L, E] workload (any real dtype).
        num_slots: R, physical slots per layer.
        num_gpus: G, GPUs per layer (must divide R).

    Returns:
        Slot loads and both balancedness values.
    """
    p = slot_loads(log2phy, logcnt, load, num_slots)
    arr = p.numpy()
    layers = arr.shape[0]
    if num_gpus <= 0 or num_slots % num_gpus:
        raise ValueError(f"{num_slots} slots cannot be split evenly over {num_gpus} GPUs")
    per_gpu = p.view(layers, num_gpus, num_slots // num_gpus).sum(dim=-1).numpy()
    return Balance(slot_load=p, expert=_ratio(arr), gpu=_ratio(per_gpu))


def simulate_loop(
    log2phy: torch.Tensor, logcnt: torch.Tensor, load: torch.Tensor, num_slots: int, num_gpus: int
) -> Balance:
    """Reference simulation with an explicit loop over layers, experts and replicas (slow)."""
    layers, experts, _ = log2phy.shape
    slots_per_gpu = num_slots // num_gpus
    if num_gpus <= 0 or num_slots % num_gpus:
        raise ValueError(f"{num_slots} slots cannot be split evenly over {num_gpus} GPUs")
    ids = log2phy.tolist()
    counts = logcnt.tolist()
    w = load.to(torch.float64).tolist()
    p = [[0.0] * num_slots for _ in range(layers)]
    for layer in range(layers):
        for e in range(experts):
            c = int(counts[layer][e])
            if c <= 0:
                continue
            share = w[layer][e] / c
            for j in range(c):
                p[layer][ids[layer][e][j]] += share
    gpu = [[sum(row[k * slots_per_gpu : (k + 1) * slots_per_gpu]) for k in range(num_gpus)] for row in p]

    def ratio(rows: list[list[float]]) -> float:
        peak = sum(max(r) for r in rows)
        if peak <= 0.0:
            return 1.0
        return sum(sum(r) / len(r) for r in rows) / peak

    slot_load = torch.tensor(p, dtype=torch.float64).view(layers, num_slots)
    return Balance(slot_load=slot_load, expert=ratio(p), gpu=ratio(gpu))
