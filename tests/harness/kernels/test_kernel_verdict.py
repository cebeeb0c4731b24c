"""The ``timing`` rule on constructed bounds: a loaded machine makes a case undecided (an infra
error, retried, no score), never a verdict; real work still is one; and nothing the candidate can
do to the echo turns a suspect case into a pass."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.evaluation.errors import CandidateInvalid, InfraError
from harness.kernels.params import DriverParams
from harness.kernels.timing import CaseBound
from harness.kernels.verdict import is_suspect, judge

P = DriverParams(entry="custom_kernel", device="cpu")
QUIET_ECHO = 301e-6


def _bound(fastest: float, echo_at_fastest: float, reported: float = 17e-6, **kw: float) -> CaseBound:
    lower = max(0.0, fastest - (1 + P.transport_slack) * QUIET_ECHO - P.transport_margin_s)
    return CaseBound(lower, fastest, QUIET_ECHO, reported, 43, echo_at_fastest=echo_at_fastest, **kw)  # type: ignore[arg-type]


def test_an_honest_case_on_a_machine_loaded_throughout_is_undecided_not_invalid() -> None:
    # CI's failure, as measured: fastest round trip 654.8 us against the quiet echo's 301.1 us;
    # the echo made right after that request was slowed by the same load.
    b = _bound(654.8e-6, echo_at_fastest=560e-6)
    assert is_suspect(b, P)
    with pytest.raises(InfraError, match="undecided under load"):
        judge(b, P, "case")


def test_the_same_round_trips_beside_a_quiet_echo_are_a_verdict() -> None:
    with pytest.raises(CandidateInvalid, match="rule 'timing'.*trusted round trips"):
        judge(_bound(654.8e-6, echo_at_fastest=305e-6), P, "case")
    with pytest.raises(CandidateInvalid, match="rule 'timing'"):
        judge(_bound(654.8e-6, echo_at_fastest=math.inf), P, "case")  # no echo was needed


def test_real_work_far_above_its_own_loaded_echo_is_still_a_verdict() -> None:
    # 3 ms of work per call reported as 1 us, on a machine that doubled the echo.
    with pytest.raises(CandidateInvalid, match="rule 'timing'"):
        judge(_bound(3.6e-3, echo_at_fastest=600e-6, reported=1e-6), P, "case")


def test_an_os_figure_is_judged_by_itself() -> None:
    b = _bound(654.8e-6, echo_at_fastest=560e-6, os_cpu=400e-6, os_cpu_raw=400e-6)
    with pytest.raises(CandidateInvalid, match="process tree used"):
        judge(b, P, "case")


@given(
    fastest=st.floats(0.0, 0.05),
    reported=st.floats(0.0, 0.05),
    echoes=st.lists(st.one_of(st.just(math.inf), st.floats(0.0, 0.05)), min_size=2, max_size=2),
)
def test_nothing_done_to_the_echo_turns_a_suspect_case_into_a_pass(
    fastest: float, reported: float, echoes: list[float]
) -> None:
    """The echo after the fastest request is the one figure a candidate might slow: whatever it
    is, a case passes exactly when it is not suspect, and a verdict is only ever invalid or infra."""
    outcomes = []
    for e in echoes:
        b = _bound(fastest, echo_at_fastest=e, reported=reported)
        try:
            judge(b, P, "case")
            outcomes.append("pass")
        except (CandidateInvalid, InfraError):
            outcomes.append("fail")
        assert (outcomes[-1] == "pass") == (not is_suspect(b, P))
    assert outcomes[0] == outcomes[1]
