"""The GPU models a variant may name, and how a device is recognised as one of them.

Timings are comparable only on one model *and* form factor: an H100 PCIe has 114 SMs and HBM2e,
an H100 SXM 132 SMs and HBM3 (and a higher power limit), a MIG slice a fraction of either. A variant's
``hardware.gpu`` is therefore one of :data:`MODELS`' keys (``H100 SXM``, not ``H100``). A device is
recognised by the name the driver reports (``torch.cuda.get_device_name``, ``nvidia-smi
--query-gpu=name``) and confirmed by its properties (``torch.cuda.get_device_properties``:
``multi_processor_count``, ``total_memory``); where the name alone is ambiguous (a bare ``NVIDIA
H100``), the properties decide. MIG slices are never a model: their timings depend on the slice.

The SM counts are NVIDIA's published figures (H100 whitepaper, A100 whitepaper, H200 / GH200
datasheets); the memory windows bracket what the driver reports as total memory (e.g. 81,559 MiB on
an H100 SXM, 40,339 MiB on an A100 PCIe 40GB) with a margin for driver reservations.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

_SPLIT = re.compile(r"[\s\-_/]+")
GIB = 1024**3


def name_words(name: str) -> tuple[str, ...]:
    """The lower-case words of a device or model name (split at spaces, ``-``, ``_``, ``/``).

    ``NVIDIA`` is dropped: drivers add it to some names and not others (``Tesla T4``).
    """
    return tuple(w for w in _SPLIT.split(name.lower()) if w and w != "nvidia")


@dataclass(frozen=True)
class GpuModel:
    """One GPU model and form factor whose timings may be pooled."""

    key: str
    """What a manifest's ``hardware.gpu`` says, e.g. ``H100 SXM``."""
    family: str
    """The chip's name word (``h100``, ``a100``): an ambiguous device name is matched by it."""
    names: tuple[str, ...]
    """Device names the driver reports for exactly this model (compared word for word)."""
    sms: int
    """Streaming multiprocessors (``multi_processor_count``) of the full GPU."""
    memory_gib: tuple[float, float]
    """Range of ``total_memory`` in GiB that the driver reports for it."""
    modal: str = ""
    """Modal's GPU string that gets exactly this model (empty: Modal does not offer it)."""

    def fits(self, sms: int, memory_bytes: int) -> bool:
        """Whether a device with these properties can be this model."""
        lo, hi = self.memory_gib
        return sms == self.sms and lo * GIB <= memory_bytes <= hi * GIB


MODELS: Mapping[str, GpuModel] = {
    m.key: m
    for m in (
        GpuModel("H100 SXM", "h100", ("NVIDIA H100 80GB HBM3",), 132, (76.0, 81.0), "H100!"),
        GpuModel("H100 PCIe", "h100", ("NVIDIA H100 PCIe",), 114, (76.0, 81.0)),
        GpuModel("H100 NVL", "h100", ("NVIDIA H100 NVL",), 132, (90.0, 96.0)),
        GpuModel("H200 SXM", "h200", ("NVIDIA H200",), 132, (135.0, 142.0), "H200"),
        GpuModel("H200 NVL", "h200", ("NVIDIA H200 NVL",), 132, (135.0, 142.0)),
        GpuModel("GH200 480GB", "gh200", ("NVIDIA GH200 480GB",), 132, (90.0, 98.0)),
        GpuModel("A100 SXM4 40GB", "a100", ("NVIDIA A100-SXM4-40GB",), 108, (38.0, 41.0), "A100-40GB"),
        GpuModel("A100 SXM4 80GB", "a100", ("NVIDIA A100-SXM4-80GB",), 108, (76.0, 81.0), "A100-80GB"),
        GpuModel("A100 PCIe 40GB", "a100", ("NVIDIA A100-PCIE-40GB",), 108, (38.0, 41.0)),
        GpuModel("A100 PCIe 80GB", "a100", ("NVIDIA A100 80GB PCIe",), 108, (76.0, 81.0)),
    )
}
"""Every model a variant may require, by manifest key."""


def model(key: str) -> GpuModel:
    """The model a manifest names.

    Raises:
        ValueError: If ``key`` is not one of :data:`MODELS` (the message lists them).
    """
    try:
        return MODELS[key]
    except KeyError:
        raise ValueError(
            f"unknown GPU model {key!r}: name the exact model and form factor, one of {', '.join(MODELS)}"
        ) from None


def is_mig(name: str, visible: str | None = None) -> bool:
    """Whether this process sees a MIG slice rather than a whole GPU.

    Args:
        name: The device's name; a MIG slice's carries ``MIG`` and its profile
            (``NVIDIA H100 80GB HBM3 MIG 1g.10gb``).
        visible: ``CUDA_VISIBLE_DEVICES``; MIG slices are selected there by ``MIG-<uuid>``.
    """
    if "mig" in name_words(name):
        return True
    return any(v.strip().startswith("MIG-") for v in (visible or "").split(","))


def identify(name: str, sms: int | None = None, memory_bytes: int | None = None) -> GpuModel | None:
    """The model a device is, from its name and, where known, its properties.

    A name listed by exactly one model is that model if the properties (when given) fit it. A name
    that only carries a chip's word (``NVIDIA H100``) is ambiguous: the properties must single out
    one model of that chip. MIG slices are never a model.

    Args:
        name: The device's name as the driver reports it.
        sms: ``multi_processor_count`` (None: not known, name only).
        memory_bytes: ``total_memory`` (None: not known, name only).

    Returns:
        The model, or None when the device is no listed model or cannot be told apart.
    """
    words = name_words(name)
    if "mig" in words:
        return None
    known = sms is not None and memory_bytes is not None
    exact = [m for m in MODELS.values() if any(name_words(n) == words for n in m.names)]
    if exact:
        m = exact[0]
        return m if not known or m.fits(sms or 0, memory_bytes or 0) else None
    if not known:
        return None
    fits = [m for m in MODELS.values() if m.family in words and m.fits(sms or 0, memory_bytes or 0)]
    return fits[0] if len(fits) == 1 else None
