"""`bench run`'s worker count for GPU variants: one worker per GPU (block), not one per core."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evobench.cli.run_plan import resolve_workers
from harness.envs.registry import default_registry
from harness.hardware.gpus import assign, gpu_worker_plan


@pytest.mark.parametrize(("pool", "expected"), [([0], 1), ([0, 1, 2, 3], 4), ([], 1), ([2, 5], 2)])
def test_gpu_variant_defaults_to_one_worker_per_gpu(
    monkeypatch: pytest.MonkeyPatch, pool: list[int], expected: int
) -> None:
    import harness.hardware.gpus as gpus

    monkeypatch.setattr(gpus, "host_gpus", lambda: pool)
    v = default_registry().get("trimul-h100")
    assert resolve_workers(v, "local", 0)[0] == expected
    assert resolve_workers(v, "docker", 0)[0] == expected
    assert resolve_workers(v, "modal", 0)[0] == 1  # each Modal slot is a billed GPU
    assert resolve_workers(v, "local", 3)[0] == 3  # an explicit --workers is kept


def test_cpu_variant_keeps_one_worker_per_core() -> None:
    v = default_registry().get("trimul-tiny")
    assert resolve_workers(v, "local", 0)[0] == (os.cpu_count() or 1)


def test_more_workers_than_gpus_warns() -> None:
    n, warning = gpu_worker_plan(1, 8, [0, 1], remote=False)
    assert n == 8 and "share 2 GPU(s)" in warning


@given(st.integers(1, 4), st.lists(st.integers(0, 15), max_size=8, unique=True))
def test_default_slots_get_disjoint_gpus(gpu_count: int, pool: list[int]) -> None:
    n, warning = gpu_worker_plan(gpu_count, 0, pool, remote=False)
    assert not warning
    if len(pool) >= gpu_count:
        blocks = [assign(gpu_count, s, pool) for s in range(n)]
        assert len({g for b in blocks for g in b}) == n * gpu_count  # no GPU shared by two slots
