"""Host GPU discovery and the slot -> GPU assignment, below both ``scoring`` and ``sandbox``.

The sandbox binds a slot's GPUs (:mod:`harness.sandbox.gpus`) and the slot's trusted scorer
computes on the same ones (:mod:`harness.scoring.device`); both take the host's GPU list and the
round-robin assignment from here. ``bench run`` sizes its worker pool with :func:`gpu_worker_plan`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from harness.evaluation.errors import InfraError

_GPU_NODE = re.compile(r"nvidia(\d+)")


def host_gpus(dev_root: Path = Path("/dev"), visible: str | None = None) -> list[int]:
    """GPU numbers this machine offers to sandboxes: ``/dev/nvidia<N>`` nodes, sorted.

    Args:
        dev_root: The device directory (a fake tree in tests).
        visible: The harness's own ``CUDA_VISIBLE_DEVICES`` (None: read it from the environment);
            when it is a list of numbers, only those GPUs are handed out.
    """
    try:
        found = sorted(int(m.group(1)) for p in dev_root.iterdir() if (m := _GPU_NODE.fullmatch(p.name)))
    except OSError:
        return []
    visible = os.environ.get("CUDA_VISIBLE_DEVICES") if visible is None else visible
    if visible is not None and visible.strip():
        wanted = [v.strip() for v in visible.split(",")]
        if all(v.isdigit() for v in wanted):
            keep = [int(v) for v in wanted]
            found = [n for n in keep if n in found]
    return found


def assign(gpu_count: int, slot: int, pool: list[int]) -> tuple[int, ...]:
    """The ``gpu_count`` GPUs of worker ``slot``: consecutive blocks of ``pool``, round-robin.

    Raises:
        InfraError: If the machine has GPUs but fewer than ``gpu_count``.
    """
    if gpu_count <= 0 or not pool:
        return ()
    if gpu_count > len(pool):
        raise InfraError(
            f"the variant requests {gpu_count} GPUs but this machine offers {len(pool)} ({pool})"
        )
    blocks = len(pool) // gpu_count
    start = (slot % blocks) * gpu_count
    return tuple(pool[start : start + gpu_count])


def gpu_worker_plan(gpu_count: int, requested: int, pool: list[int], remote: bool) -> tuple[int, str]:
    """Worker count for a run of a variant with ``gpu_count`` GPUs, and a warning ("" if none).

    GPU variants default to one worker per block of ``gpu_count`` GPUs of this machine (``pool``),
    not one per core: slots beyond that would share a GPU and disturb each other's timings.
    A remote backend (Modal: one GPU sandbox per slot) defaults to one worker, since each slot is
    a billed GPU. CPU variants keep the caller's default (``requested``, 0: one per core).

    Args:
        gpu_count: The variant's ``hardware.gpu_count``.
        requested: ``--workers`` (0: default).
        pool: GPUs of this machine (:func:`host_gpus`).
        remote: Whether slots get their GPUs from a remote service rather than this machine.
    """
    if gpu_count <= 0:
        return requested or (os.cpu_count() or 1), ""
    if remote:
        return requested or 1, ""
    blocks = len(pool) // gpu_count
    if not requested:
        return max(blocks, 1), ""
    if blocks and requested > blocks:
        return requested, (
            f"{requested} workers share {len(pool)} GPU(s) ({blocks} slot(s) of {gpu_count}): "
            "slots on the same GPU disturb each other's timings"
        )
    return requested, ""
