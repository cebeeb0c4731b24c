"""Batch sizing of timed kernel requests (``harness.kernels.batch``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.kernels.batch import BatchPlan


def test_no_target_means_one_call_per_request() -> None:
    run = BatchPlan().start(1e-3)
    assert run.reps == 1 and run.settled
    for _ in range(BatchPlan().min_requests):
        run.record(1, 1e-6)
        assert run.reps == 1 and run.more(stop_done=False)
    assert not run.more(stop_done=True)


def test_unbatched_cases_close_on_at_least_min_requests() -> None:
    """GPU cases (no batching) too: the round-trip bound's minima need a group of 5 requests."""
    run = BatchPlan().start(1e-3)
    made = 0
    while run.more(stop_done=made >= 3):  # a stop rule satisfied after 3 requests
        run.record(1, 1e-3)
        made += 1
    assert made == BatchPlan().min_requests


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(ValueError, match="batching"):
        BatchPlan.from_params({"batch_target_us": -1})
    with pytest.raises(ValueError, match="batching"):
        BatchPlan.from_params({"batch_max": 0})
    assert BatchPlan.from_params({"batch_target_us": 5000}).target_s == pytest.approx(5e-3)


@given(
    per_call=st.floats(1e-6, 2e-2),
    warmup=st.floats(1e-6, 1.0),
    target=st.floats(1e-4, 2e-2),
    cap=st.integers(1, 4096),
)
def test_batches_grow_straight_to_a_request_of_half_the_target(
    per_call: float, warmup: float, target: float, cap: int
) -> None:
    # Whatever the (candidate-controlled) warm-up round trip, a case ends with requests of at
    # least half the target or of the maximal size, and makes min_requests of them. At a steady
    # time per call one short request sizes the case: at most two sizes (the warm-up's guess, then
    # the final one), so nearly all its requests are of the size that counts (doublings could
    # reach it late and leave as few as four under load).
    plan = BatchPlan(target_s=target, max_reps=cap, settle_requests=40)
    run = plan.start(warmup)
    assert 1 <= run.reps <= cap
    sizes = []
    while run.more(stop_done=len(sizes) >= 3):
        sizes.append(run.reps)
        run.record(run.reps, per_call * run.reps)
        assert len(sizes) < 60
    last = sizes[-1]
    assert last == cap or per_call * last >= 0.5 * target
    assert sizes[-plan.min_requests :] == [last] * plan.min_requests
    assert sizes == sorted(sizes)  # never shrinks
    assert len(set(sizes)) <= 2, sizes


def test_extra_requests_are_capped() -> None:
    plan = BatchPlan(target_s=1.0, max_reps=1 << 20, settle_requests=4)
    run = plan.start(1e-6)
    n = 0
    while run.more(stop_done=True):
        run.record(run.reps, 1e-9)
        n += 1
    assert n == 4
