"""The variant's GPU, checked at run time before any candidate is evaluated (kernels, KuaiRec).

Timings from another GPU (or from a CPU) are not comparable with a variant's leaderboard, so a
run on the wrong machine is refused unless ``EVOBENCH_GPU_OVERRIDE=1`` is set; the override and
the device actually used are recorded in every result's metrics.

The GPU a scorer uses is its worker slot's: the one the slot's candidate sandbox gets (see
:mod:`harness.hardware.gpus`). :func:`choose_device` makes it torch's current device, so every
``"cuda"`` tensor of the scorer (inputs, references) lives on the candidate's GPU, not on GPU 0.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from harness.evaluation.errors import InfraError
from harness.hardware.gpus import assign, host_gpus

OVERRIDE_ENV = "EVOBENCH_GPU_OVERRIDE"
_worker_slot = 0
_NAME_SPLIT = re.compile(r"[\s\-_/]+")


def bind_worker_slot(slot: int) -> None:
    """Record this trusted process's worker slot (the local backend's worker, a container server).

    Also fixes CUDA's device order to PCI bus order (the ``nvidia-smi`` / ``/dev/nvidia<N>``
    numbering the sandboxes' GPUs are handed out by); it must run before CUDA starts here.
    """
    global _worker_slot
    _worker_slot = slot
    os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"


def slot_cuda_index(gpu_count: int, slot: int, pool: list[int]) -> int:
    """Torch's index, in this process, of the first GPU worker ``slot`` is given.

    ``pool`` is :func:`~harness.hardware.gpus.host_gpus` here: the GPUs this process can see, in
    the order CUDA enumerates them (a container sees only its own, whatever their host numbers).

    Raises:
        InfraError: If the machine has GPUs but fewer than ``gpu_count``.
    """
    chosen = assign(max(gpu_count, 1), slot, pool)
    return pool.index(chosen[0]) if chosen else 0


def gpu_matches(required: str, name: str) -> bool:
    """Whether the device ``name`` is the GPU model ``required`` (whole words, case-insensitive).

    Names are split at spaces, ``-``, ``_`` and ``/``, and every word of ``required`` must be one of
    the name's words: ``H100`` matches ``NVIDIA H100 80GB HBM3`` and ``NVIDIA H100 PCIe``, ``A100``
    matches ``NVIDIA A100-SXM4-80GB``, but ``H200`` does not match ``NVIDIA GH200 480GB`` and
    ``A100`` not ``NVIDIA RTX A1000`` (a substring test let both through).
    """
    want = [w for w in _NAME_SPLIT.split(required.lower()) if w]
    have = set(_NAME_SPLIT.split(name.lower()))
    return bool(want) and all(w in have for w in want)


@dataclass(frozen=True)
class DeviceChoice:
    """Where a kernel evaluation runs and how its timings must be labelled."""

    device: str
    """``cuda`` or ``cpu``."""
    name: str
    """What ``torch.cuda.get_device_name()`` said, or ``cpu``."""
    override: bool
    """Whether the variant's GPU requirement was overridden."""
    index: int = 0
    """Torch's index of the GPU in this process (made the current device; 0 on CPU)."""

    @property
    def cpu_timing(self) -> bool:
        """True when times are CPU ``perf_counter`` times (never to be ranked with GPU times)."""
        return self.device == "cpu"

    def metrics(self) -> dict[str, float]:
        """Flags recorded with every result."""
        return {"timing_cpu": float(self.cpu_timing), "gpu_override": float(self.override)}


def _slot_gpu(torch: Any, index: int) -> str | None:
    """Name of GPU ``index``, made torch's current device (None: no CUDA GPU).

    Raises:
        InfraError: If CUDA sees fewer GPUs than the slot's index.
    """
    if not torch.cuda.is_available():
        return None
    count = int(torch.cuda.device_count())
    if index >= count:
        raise InfraError(f"this worker slot's GPU is cuda:{index} but CUDA sees {count} GPU(s) here")
    torch.cuda.set_device(index)
    return str(torch.cuda.get_device_name(index))


def choose_device(
    required_gpu: str,
    torch: Any = None,
    env: dict[str, str] | None = None,
    *,
    gpu_count: int = 1,
    slot: int | None = None,
    pool: list[int] | None = None,
) -> DeviceChoice:
    """Check that this worker slot's GPU is the variant's (``required_gpu`` empty: a CPU variant).

    The slot's GPU (the one its candidates get) becomes torch's current device here. It matches
    when it is the model ``required_gpu`` names (:func:`gpu_matches`, whole words).

    Args:
        required_gpu: The variant's ``hardware.gpu``.
        torch: The torch module (injected by tests).
        env: Environment variables (default ``os.environ``).
        gpu_count: The variant's ``hardware.gpu_count`` (slots get consecutive blocks).
        slot: Worker slot (None: the one :func:`bind_worker_slot` recorded, else 0).
        pool: GPUs this process sees (None: :func:`~harness.hardware.gpus.host_gpus`).

    Raises:
        InfraError: The GPU is missing or of another type and no override was given.
    """
    if torch is None:
        import torch as _torch

        torch = _torch
    env = dict(os.environ) if env is None else env
    if not required_gpu:
        return DeviceChoice("cpu", "cpu", False)
    gpus = host_gpus() if pool is None else pool
    index = slot_cuda_index(gpu_count, _worker_slot if slot is None else slot, gpus)
    name = _slot_gpu(torch, index)
    if name is not None and gpu_matches(required_gpu, name):
        return DeviceChoice("cuda", name, False, index)
    if env.get(OVERRIDE_ENV) == "1":
        return DeviceChoice("cuda" if name else "cpu", name or "cpu", True, index if name else 0)
    found = f"found {name!r}" if name else "no CUDA GPU is visible"
    raise InfraError(
        f"this variant needs an NVIDIA {required_gpu} GPU; {found}. Run it on a machine with a "
        f"{required_gpu} (e.g. the Modal backend), or set {OVERRIDE_ENV}=1 to run anyway "
        "(results are then marked gpu_override=1 and are not comparable)"
    )
