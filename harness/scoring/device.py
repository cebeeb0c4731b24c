"""The variant's GPU, checked at run time before any candidate is evaluated (kernels, KuaiRec).

Timings from another GPU (or from a CPU) are not comparable with a variant's leaderboard, so a
run on the wrong machine is refused unless ``EVOBENCH_GPU_OVERRIDE=1`` is set; the override and
the device actually used are recorded in every result's metrics.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from harness.evaluation.errors import InfraError

OVERRIDE_ENV = "EVOBENCH_GPU_OVERRIDE"


@dataclass(frozen=True)
class DeviceChoice:
    """Where a kernel evaluation runs and how its timings must be labelled."""

    device: str
    """``cuda`` or ``cpu``."""
    name: str
    """What ``torch.cuda.get_device_name()`` said, or ``cpu``."""
    override: bool
    """Whether the variant's GPU requirement was overridden."""

    @property
    def cpu_timing(self) -> bool:
        """True when times are CPU ``perf_counter`` times (never to be ranked with GPU times)."""
        return self.device == "cpu"

    def metrics(self) -> dict[str, float]:
        """Flags recorded with every result."""
        return {"timing_cpu": float(self.cpu_timing), "gpu_override": float(self.override)}


def _current_gpu(torch: Any) -> str | None:
    if not torch.cuda.is_available():
        return None
    return str(torch.cuda.get_device_name(torch.cuda.current_device()))


def choose_device(required_gpu: str, torch: Any = None, env: dict[str, str] | None = None) -> DeviceChoice:
    """Check that this machine has the variant's GPU (``required_gpu`` empty: a CPU variant).

    A GPU matches when ``required_gpu`` (e.g. ``H100``) occurs in its device name,
    case-insensitively (``NVIDIA H100 80GB HBM3``).

    Args:
        required_gpu: The variant's ``hardware.gpu``.
        torch: The torch module (injected by tests).
        env: Environment variables (default ``os.environ``).

    Raises:
        InfraError: The GPU is missing or of another type and no override was given.
    """
    if torch is None:
        import torch as _torch

        torch = _torch
    env = dict(os.environ) if env is None else env
    if not required_gpu:
        return DeviceChoice("cpu", "cpu", False)
    name = _current_gpu(torch)
    if name is not None and required_gpu.lower() in name.lower():
        return DeviceChoice("cuda", name, False)
    if env.get(OVERRIDE_ENV) == "1":
        return DeviceChoice("cuda" if name else "cpu", name or "cpu", True)
    found = f"found {name!r}" if name else "no CUDA GPU is visible"
    raise InfraError(
        f"this variant needs an NVIDIA {required_gpu} GPU; {found}. Run it on a machine with a "
        f"{required_gpu} (e.g. the Modal backend), or set {OVERRIDE_ENV}=1 to run anyway "
        "(results are then marked gpu_override=1 and are not comparable)"
    )
