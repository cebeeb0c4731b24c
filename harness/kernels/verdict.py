"""The ``timing`` rule: what a case's trusted bound says of the sandbox's own figures.

Pure functions of a :class:`~harness.kernels.timing.CaseBound` and the session's
:class:`~harness.kernels.params.DriverParams`, so the rule can be checked without a driver.
Trusted side only.
"""

from __future__ import annotations

from harness.evaluation.errors import CandidateInvalid, InfraError

from .params import DriverParams
from .timing import CaseBound


def is_suspect(b: CaseBound, p: DriverParams) -> bool:
    """Whether the sandbox's median report is implausibly low against the case's trusted figure.

    With an OS figure a low report gains nothing (the figure counts), but one far under it is
    still a lie worth a clear verdict; without one the round-trip bound is the reference.
    """
    ref = b.os_cpu_raw if b.os_cpu_raw is not None else b.lower
    return ref > p.timing_floor_s and b.reported_median < p.suspect_ratio * ref


def judge(b: CaseBound, p: DriverParams, what: str) -> None:
    """Raise the case's verdict where :func:`is_suspect` holds at its close; return otherwise.

    Raises:
        CandidateInvalid: ``rule 'timing'``: the median report is under ``suspect_ratio`` of the
            trusted figure while that figure is above ``timing_floor_s``.
        InfraError: Only the round-trip bound counts, the machine was loaded all through the case
            (the echo right after the fastest request was slowed), and against that echo the case
            is not suspect: other work, not the candidate, may have made the round trips slow.
    """
    if not is_suspect(b, p):
        return
    if b.os_cpu is not None:
        raise CandidateInvalid(
            f"rule 'timing': {what}: the sandbox reports a median {b.reported_median * 1e6:.1f} us "
            f"per call, but its process tree used {(b.os_cpu_raw or 0.0) * 1e6:.1f} us of CPU per call "
            f"({b.window_cpu * 1e3:.2f} ms over {b.os_calls} calls, less the trusted "
            f"echo's {b.echo_cpu * 1e3:.2f} ms for the same requests)"
        )
    matched = b.load_matched(p.transport_slack, p.transport_margin_s)
    # An infra error gives no score and is retried: a candidate that slows the echo on purpose
    # to land here gains nothing. One far slower than its own loaded echo did real work.
    still = matched is None or (matched > p.timing_floor_s and b.reported_median < p.suspect_ratio * matched)
    if not still:
        raise InfraError(
            f"timing undecided under load: {what}: the trusted round trips show at least "
            f"{b.lower * 1e6:.1f} us per call against the quietest echo ({b.overhead_lo * 1e6:.1f} us), "
            f"but the echo made right after the fastest request took {b.echo_at_fastest * 1e6:.1f} us "
            f"and against it the case is not suspect: the machine was loaded all through the case"
        )
    raise CandidateInvalid(
        f"rule 'timing': {what}: the sandbox reports a median {b.reported_median * 1e6:.1f} us "
        f"per call, but the trusted round trips show at least {b.lower * 1e6:.1f} us "
        f"(fastest of {b.calls} requests of {b.reps} calls {b.fastest_round_trip * 1e6:.1f} us, "
        f"fastest echo of the same request {b.overhead_lo * 1e6:.1f} us)"
    )
