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
from dataclasses import dataclass, replace
from typing import Any

from harness.evaluation.errors import InfraError
from harness.hardware.gpu_models import GIB, identify, is_mig, model
from harness.hardware.gpus import assign, eval_memory_fraction, evaluation_pool, host_gpus

OVERRIDE_ENV = "EVOBENCH_GPU_OVERRIDE"
_worker_slot = 0


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
    Slots are given GPUs from :func:`~harness.hardware.gpus.evaluation_pool` (not the agent's),
    the same ones the sandboxes get; the index is the GPU's place in ``pool``.

    Raises:
        InfraError: If the machine has GPUs but fewer than ``gpu_count`` for evaluations.
    """
    chosen = assign(max(gpu_count, 1), slot, evaluation_pool(pool))
    return pool.index(chosen[0]) if chosen else 0


def gpu_matches(required: str, name: str) -> bool:
    """Whether a device called ``name`` is the model ``required`` by its name alone.

    ``required`` is a :data:`~harness.hardware.gpu_models.MODELS` key (``H100 SXM``); the name
    must be one that model's driver reports, word for word and case-insensitive: ``H100 SXM``
    matches ``NVIDIA H100 80GB HBM3`` but not ``NVIDIA H100 PCIe``, ``NVIDIA H100 NVL`` or a MIG
    slice. A name that only an inspection of the device's properties could settle (a bare
    ``NVIDIA H100``) does not match here; :func:`choose_device` settles it.
    """
    found = identify(name)
    return found is not None and found.key == required


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
    sms: int = 0
    """The GPU's streaming multiprocessors (``multi_processor_count``; 0 on CPU)."""
    memory_bytes: int = 0
    """The GPU's ``total_memory`` in bytes (0 on CPU)."""

    @property
    def cpu_timing(self) -> bool:
        """True when times are CPU ``perf_counter`` times (never to be ranked with GPU times)."""
        return self.device == "cpu"

    @property
    def label(self) -> str:
        """The device as every result row records it: ``cpu``, or the GPU's name and SM count.

        The SM count tells apart devices a driver names alike (a MIG slice, a bare ``NVIDIA H100``).
        """
        return "cpu" if self.cpu_timing else f"{self.name} ({self.sms} SMs)"

    def metrics(self) -> dict[str, float]:
        """Flags recorded with every result."""
        return {"timing_cpu": float(self.cpu_timing), "gpu_override": float(self.override)}


def _describe(seen: DeviceChoice) -> str:
    """Name, SMs and memory of a GPU, for refusals."""
    return f"{seen.name!r} ({seen.sms} SMs, {seen.memory_bytes / GIB:.1f} GiB)"


def cap_memory(torch: Any, index: int, env: dict[str, str] | None = None) -> float | None:
    """Cap this trusted process's allocations on GPU ``index`` where a GPU memory plan asks for it.

    A learning run on one GPU shares it with its evaluations (``agents/learning/gpu_plan.py``):
    the plan's per-process share (``EVOBENCH_EVAL_GPU_FRACTION``) becomes
    ``torch.cuda.set_per_process_memory_fraction(share, index)`` (torch 2.13: a float in [0, 1],
    an allocation beyond ``share * total_memory`` raises out-of-memory here instead of starving
    the agent's vLLM and learner).

    Returns:
        The share applied, or None when no plan asked for one.

    Raises:
        InfraError: If the planned share is malformed.
    """
    share = eval_memory_fraction(env)
    if share is not None:
        torch.cuda.set_per_process_memory_fraction(float(share), index)
    return share


def _slot_gpu(torch: Any, index: int) -> DeviceChoice | None:
    """GPU ``index`` (not yet checked), made torch's current device (None: no CUDA GPU).

    Raises:
        InfraError: If CUDA sees fewer GPUs than the slot's index.
    """
    if not torch.cuda.is_available():
        return None
    count = int(torch.cuda.device_count())
    if index >= count:
        raise InfraError(f"this worker slot's GPU is cuda:{index} but CUDA sees {count} GPU(s) here")
    torch.cuda.set_device(index)
    cap_memory(torch, index)
    # torch 2.13: _CudaDeviceProperties has name, multi_processor_count and total_memory (bytes).
    props = torch.cuda.get_device_properties(index)
    name = str(torch.cuda.get_device_name(index))
    return DeviceChoice("cuda", name, False, index, int(props.multi_processor_count), int(props.total_memory))


def _mismatch(required: str, seen: DeviceChoice | None, visible: str | None) -> str:
    """Why the slot's GPU is not the variant's model."""
    if seen is None:
        return f"this variant needs an NVIDIA {required} GPU; no CUDA GPU is visible"
    if is_mig(seen.name, visible):
        return (
            f"this variant needs a whole NVIDIA {required} GPU; this worker's GPU is a MIG slice "
            f"({_describe(seen)}, CUDA_VISIBLE_DEVICES={visible or ''!r}): a slice's timings depend on "
            "its size and its neighbours, so they are never ranked. Disable MIG (nvidia-smi -mig 0) or "
            "use another machine"
        )
    found = identify(seen.name, seen.sms, seen.memory_bytes)
    want = model(required)
    if found is not None:
        what = f"which is an {found.key}"
    elif identify(seen.name) is not None:
        what = f"whose properties do not fit its name (an {want.key} has {want.sms} SMs)"
    else:
        what = "which is none of the listed models"
    return f"this variant needs an NVIDIA {required} GPU; found {_describe(seen)}, {what}"


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
    when its name and properties identify exactly the model ``required_gpu`` names
    (:func:`~harness.hardware.gpu_models.identify`: model and form factor); a MIG slice never does.

    Args:
        required_gpu: The variant's ``hardware.gpu`` (a :data:`~harness.hardware.gpu_models.MODELS` key).
        torch: The torch module (injected by tests).
        env: Environment variables (default ``os.environ``).
        gpu_count: The variant's ``hardware.gpu_count`` (slots get consecutive blocks).
        slot: Worker slot (None: the one :func:`bind_worker_slot` recorded, else 0).
        pool: GPUs this process sees (None: :func:`~harness.hardware.gpus.host_gpus`).

    Raises:
        InfraError: The GPU is missing, of another model or form factor, or a MIG slice, and no
            override was given; or ``required_gpu`` is no known model.
    """
    if torch is None:
        import torch as _torch

        torch = _torch
    env = dict(os.environ) if env is None else env
    if not required_gpu:
        return DeviceChoice("cpu", "cpu", False)
    try:
        model(required_gpu)
    except ValueError as e:
        raise InfraError(f"the variant's hardware.gpu: {e}") from None
    gpus = host_gpus() if pool is None else pool
    index = slot_cuda_index(gpu_count, _worker_slot if slot is None else slot, gpus)
    seen = _slot_gpu(torch, index)
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if seen is not None and not is_mig(seen.name, visible):
        found = identify(seen.name, seen.sms, seen.memory_bytes)
        if found is not None and found.key == required_gpu:
            return seen
    if env.get(OVERRIDE_ENV) == "1":
        return DeviceChoice("cpu", "cpu", True) if seen is None else replace(seen, override=True)
    raise InfraError(
        f"{_mismatch(required_gpu, seen, visible)}. Run it on a machine with an {required_gpu} "
        f"(e.g. the Modal backend), or set {OVERRIDE_ENV}=1 to run anyway "
        "(results are then marked gpu_override=1 and are not comparable)"
    )
