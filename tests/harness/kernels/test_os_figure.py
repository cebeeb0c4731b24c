"""The OS clock's scaling to the reference speed: each request at its own probe, never gameable."""

from __future__ import annotations

import math
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.kernels.timing import PROBE_REF_S, CallTiming, CaseBound, one_cpu, os_figure, speed_probe

BOUND = CaseBound(lower=0.0, fastest_round_trip=0.0, overhead_lo=0.0, reported_median=0.0, calls=0)

requests = st.lists(
    st.tuples(
        st.floats(1e-4, 5e-2),  # cpu_used
        st.floats(0.0, 1e-3),  # echo_cpu
        st.floats(1e-4, 1e-3),  # probe
        st.sampled_from([1, 8, 64]),  # reps
    ),
    min_size=1,
    max_size=12,
)


def _win(rows: list[tuple[float, float, float, int]]) -> list[CallTiming]:
    return [
        CallTiming(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, True, reps=r, echo_cpu=e, cpu_used=u, probe=p)
        for u, e, p, r in rows
    ]


def _figure(rows: list[tuple[float, float, float, int]], deferred: float = 0.0) -> CaseBound:
    win = _win(rows)
    return os_figure(BOUND, win, sum(c.cpu_used for c in win) + deferred)


Rows = list[tuple[float, float, float, int]]


@settings(max_examples=200, deadline=None)
@given(requests, st.floats(1e-4, 1e-3))
def test_one_probe_for_all_is_the_plain_scaling(rows: Rows, p: float) -> None:
    rows = [(u, e, p, r) for u, e, _, r in rows]
    b = _figure(rows)
    assert b.os_cpu is not None and b.os_cpu_raw is not None
    assert math.isclose(b.os_cpu, b.os_cpu_raw * PROBE_REF_S / p, rel_tol=1e-9, abs_tol=1e-15)


@settings(max_examples=200, deadline=None)
@given(requests, st.floats(1e-4, 1e-3))
def test_the_figure_lies_between_the_fastest_and_slowest_probes(
    rows: list[tuple[float, float, float, int]], deferred: float
) -> None:
    b = _figure(rows, deferred)
    assert b.os_cpu is not None and b.os_cpu_raw is not None
    lo = b.os_cpu_raw * PROBE_REF_S / max(p for _, _, p, _ in rows)
    hi = b.os_cpu_raw * PROBE_REF_S / min(p for _, _, p, _ in rows)
    assert lo * (1 - 1e-9) - 1e-15 <= b.os_cpu <= hi * (1 + 1e-9) + 1e-15


@settings(max_examples=300, deadline=None)
@given(requests, st.data(), st.floats(1e-6, 1e-2), st.booleans())
def test_no_placement_of_extra_cpu_lowers_the_figure(
    rows: list[tuple[float, float, float, int]], data: st.DataObject, extra: float, deferred: bool
) -> None:
    """The candidate chooses where its work lands (a request whose probe was slow, or past a reply):
    any CPU second it adds raises what counts."""
    before = _figure(rows).os_cpu
    if deferred:
        after = _figure(rows, deferred=extra).os_cpu
    else:
        k = data.draw(st.integers(0, len(rows) - 1))
        u, e, p, r = rows[k]
        after = _figure([*rows[:k], (u + extra, e, p, r), *rows[k + 1 :]]).os_cpu
    assert before is not None and after is not None
    assert after >= before * (1 - 1e-12)


def test_a_probe_pinned_to_a_cpu_runs_there_and_gives_the_thread_back() -> None:
    mine = os.sched_getaffinity(0)
    cpu = one_cpu()
    assert cpu is not None and cpu[0] in mine
    assert speed_probe(chunks=2, matmuls=2, cpus=cpu) > 0
    assert os.sched_getaffinity(0) == mine
