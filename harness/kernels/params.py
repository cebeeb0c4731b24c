"""The parameters of one kernel driver session: what the trusted scorer sets and what the driver sees.

Split from :mod:`harness.kernels.session` (which re-exports them): the in-sandbox driver's part is
written to ``params.json``; the trusted-only fields (the probe workload, the slot's GPU index) never are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .timing import ProbeWork

OutSpec = tuple[str, tuple[int, ...]]
"""An expected output tensor: torch dtype name (``float32``, ``bfloat16``) and shape."""


@dataclass(frozen=True)
class DriverParams:
    """Parameters of one driver session (the driver's part is written to ``params.json``)."""

    entry: str
    """Candidate function called with the inputs (e.g. ``custom_kernel``)."""
    device: str
    """``cuda`` or ``cpu``."""
    l2_flush_bytes: int = 0
    """Bytes written before every timed call to flush the L2 (0: none; CUDA only)."""
    mutable: tuple[int, ...] = ()
    """Indices (in input order) of input tensors the call may update in place (a KV cache)."""
    threads: int = 1
    """Torch intra-op threads."""
    timing_floor_s: float = 200e-6
    """Trusted lower bounds below this are noise: no ``timing`` verdict is drawn from them."""
    calibration_reps: int = 7
    """Echo round trips per request signature when calibrating the transport overhead."""
    calibration_budget_s: float = 2.0
    """A signature's calibration stops once its echoes took this long (at least one echo)."""
    cuda_index: int = 0
    """Torch's index, in the scorer's process, of the worker slot's GPU
    (:attr:`~harness.scoring.device.DeviceChoice.index`): the trusted echo computes there. Never in
    ``params.json``: the sandbox sees only its own GPU, as ``cuda:0``."""
    transport_slack: float = 0.1
    """Relative margin on the echo's transport floor (a fraction of it)."""
    transport_margin_s: float = 100e-6
    """Absolute margin: the sandboxed driver pays a little more per request than the echo
    (measured 0-0.12 ms on the 2-core CPU machine), which must not count as kernel time."""
    suspect_ratio: float = 0.5
    """A case is suspect while its median report is under this fraction of its trusted bound."""
    confirm_calls: int = 10
    """Extra timed calls at most per confirming round while a case looks
    :meth:`KernelSession.suspect` (noise clears)."""
    confirm_pauses_s: tuple[float, ...] = (0.0, 0.1, 0.4, 1.0)
    """One confirming round per entry, each after a pause of that many seconds: load on a busy
    machine comes in stretches longer than one burst of calls (CI saw an honest driver's 14 round
    trips in a row all slowed past 1.2 ms), so the fastest round trip is sought in windows spread
    over ~1.5 s before a ``timing`` verdict. An honest case leaves at its first unsuspect call;
    only a suspect one pays for the rounds."""
    os_clock: bool = True
    """On CPU, count the CPU time the sandbox's cgroup used (:class:`CaseBound`, ``os_cpu``)."""
    speed_probe: bool = True
    """With the OS clock, scale it by a trusted speed probe timed beside every timed request
    (:func:`~harness.kernels.timing.speed_probe`): the machine's speed drifts ~2x on a shared VM."""
    probe: ProbeWork | None = None
    """The family's own probe workload (:class:`~harness.kernels.timing.ProbeWork`; None: the
    float32 matmul probe, ``PROBE_REF_S``). Trusted side only: never in ``params.json``."""
    pin_os: bool = True
    """With the OS clock, pin the sandbox, the echo and the speed probe to one CPU, leased while
    the session is open (:func:`~harness.hardware.cpus.hold_home_cpu`): a VM's CPUs differ in
    speed from moment to moment."""
    pin_echo: bool = True
    """Where the round-trip bound counts, run the echo on a CPU the sandbox cannot use."""

    def driver_json(self) -> dict[str, Any]:
        """What ``params.json`` holds (the driver's and the echo's view)."""
        return {
            "entry": self.entry,
            "device": self.device,
            "l2_flush_bytes": self.l2_flush_bytes,
            "mutable": list(self.mutable),
            "threads": self.threads,
        }

    def echo_json(self) -> dict[str, Any]:
        """What the trusted echo gets: the driver's view plus the slot's GPU index."""
        return {**self.driver_json(), "cuda_index": self.cuda_index}
