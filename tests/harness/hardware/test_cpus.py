"""Each worker of a backend pins its CPU-clocked sessions to a CPU of its own."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from harness.hardware import cpus


@pytest.fixture(autouse=True)
def _restore() -> Iterator[None]:
    before = list(cpus._worker_index)
    yield
    cpus._worker_index[:] = before


def test_outside_a_worker_the_last_cpu() -> None:
    cpus._worker_index.clear()
    assert cpus.home_cpu() == (max(os.sched_getaffinity(0)),)


def test_workers_side_by_side_get_different_cpus() -> None:
    mine = sorted(os.sched_getaffinity(0))
    got = []
    for i in range(len(mine)):
        cpus.set_worker_index(i)
        got.append(cpus.home_cpu())
    assert got == [(c,) for c in mine]  # one each while there are CPUs enough
    cpus.set_worker_index(len(mine))
    assert cpus.home_cpu() == (mine[0],)  # more workers than CPUs: round robin
