"""GPU access for the sandboxes of variants whose hardware requests GPUs.

bubblewrap gives every sandbox a fresh, minimal ``/dev`` without NVIDIA device nodes, so CUDA
cannot start there. For a variant with ``hardware.gpu_count > 0`` the local sandbox binds:

* the device nodes of the GPUs assigned to the worker slot (``/dev/nvidia<N>``), and only those:
  the driver skips GPUs whose node it cannot open, so a candidate cannot reach a GPU that another
  worker slot is timing, whatever it sets ``CUDA_VISIBLE_DEVICES`` to;
* the driver's control nodes (``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``,
  ``/dev/nvidia-caps`` for MIG) with ``--dev-bind``;
* ``/sys`` read-only (the driver reads PCI and NUMA facts there; Docker exposes the same), and
  the directories of the trusted process's ``LD_LIBRARY_PATH`` that exist (driver libraries
  outside ``/usr``), read-only.

Variants that request no GPU get none of this. GPUs are handed out round-robin by worker slot
(``/dev/nvidia<N>`` numbers, filtered by a numeric ``CUDA_VISIBLE_DEVICES`` of the harness), and
the candidate sees ``CUDA_VISIBLE_DEVICES=0..k-1`` with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``. The node
number is assumed to equal the driver's (``nvidia-smi``) index, which holds on ordinary hosts.
The slot's trusted scorer computes on the same GPU (``harness.scoring.device.choose_device``), and
``bench run`` defaults GPU variants to one worker per block of GPUs
(:func:`harness.hardware.gpus.gpu_worker_plan`). Which GPUs the host has and which a slot gets is
:mod:`harness.hardware.gpus` (shared with the scorer's device choice).
No GPU was available where this was written: the bind layout is unit-tested against a fake
``/dev`` tree only (see ``tests/harness/sandbox/test_gpus.py``, whose real-GPU test is ``gpu``-marked).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness.envs.manifest import Hardware
from harness.hardware.gpus import assign, eval_memory_fraction, evaluation_pool, host_gpus

CONTROL_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-caps")
"""Driver nodes every CUDA process opens (``nvidia-caps``: MIG capabilities), when present."""


@dataclass(frozen=True)
class GpuAccess:
    """The GPUs one sandbox may use and what it takes to reach them."""

    indices: tuple[int, ...]
    """Host GPU numbers (``/dev/nvidia<N>``) assigned to this sandbox."""
    device_nodes: tuple[str, ...]
    """Device nodes (paths under the host ``/dev``) to bind with ``--dev-bind``."""
    ro_paths: tuple[str, ...]
    """Driver paths to bind read-only at the same place."""
    env: dict[str, str]
    """Variables the candidate gets (``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``, ...)."""


def _library_dirs(hidden: list[Path]) -> list[str]:
    out = []
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        p = Path(d)
        if d and p.is_absolute() and p.is_dir() and not any(p.resolve().is_relative_to(h) for h in hidden):
            out.append(str(p.resolve()))
    return sorted(set(out))


def gpu_access(
    hw: Hardware,
    slot: int,
    *,
    dev_root: Path = Path("/dev"),
    visible: str | None = None,
    hidden: list[Path] | None = None,
) -> GpuAccess | None:
    """What a sandbox of worker ``slot`` needs to use the variant's GPUs (None: no GPU access).

    None when the variant requests no GPU, or when this machine has no NVIDIA device node (a
    CPU-only machine: the family's scorer decides whether that is allowed).

    Args:
        hw: The variant's hardware spec.
        slot: Worker slot index (GPUs are handed out round-robin by slot).
        dev_root: The host device directory (a fake tree in tests).
        visible: The harness's ``CUDA_VISIBLE_DEVICES`` (None: from the environment).
        hidden: Paths never bound into the sandbox (library directories under them are dropped).

    Raises:
        InfraError: If the machine has GPUs but fewer than the variant requests.
    """
    if hw.gpu_count <= 0:
        return None
    chosen = assign(hw.gpu_count, slot, evaluation_pool(host_gpus(dev_root, visible)))
    if not chosen:
        return None
    nodes = [str(dev_root / f"nvidia{n}") for n in chosen]
    nodes += [str(dev_root / c) for c in CONTROL_NODES if (dev_root / c).exists()]
    libs = _library_dirs(hidden or [])
    env = {
        "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in range(len(chosen))),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    if libs:
        env["LD_LIBRARY_PATH"] = ":".join(libs)
    if (share := eval_memory_fraction()) is not None:
        # A GPU shared with the agent (agents/learning/gpu_plan.py): torch 2.13's caching allocator
        # reads its per-process cap from here. Advisory only: the candidate's own code can lift it.
        env["PYTORCH_CUDA_ALLOC_CONF"] = f"per_process_memory_fraction:{share}"
    return GpuAccess(chosen, tuple(nodes), ("/sys", *libs), env)


def gpu_binds(access: GpuAccess, dev_root: Path = Path("/dev")) -> list[tuple[str, str, str]]:
    """The bubblewrap binds ``(flag, host path, sandbox path)`` that expose ``access``.

    Device nodes keep their names under the sandbox's fresh ``/dev`` (so they must come after
    ``--dev /dev``); driver paths are bound read-only at the same place.
    """
    binds = [("--dev-bind", n, "/dev/" + str(Path(n).relative_to(dev_root))) for n in access.device_nodes]
    return binds + [("--ro-bind-try", p, p) for p in access.ro_paths]


def unshared_gpu_env(access: GpuAccess) -> dict[str, str]:
    """Variables for a candidate that sees every host GPU node (no bubblewrap).

    There the driver sees all GPUs, so only ``CUDA_VISIBLE_DEVICES`` (host numbers) narrows
    them, and a hostile candidate could widen it: only bubblewrap enforces the assignment.
    """
    return {**access.env, "CUDA_VISIBLE_DEVICES": ",".join(str(i) for i in access.indices)}
