"""Host GPU discovery and the slot -> GPU assignment, below both ``scoring`` and ``sandbox``.

The sandbox binds a slot's GPUs (:mod:`harness.sandbox.gpus`) and the slot's trusted scorer
computes on the same ones (:mod:`harness.scoring.device`); both take the host's GPU list and the
round-robin assignment from here. ``bench run`` sizes its worker pool with :func:`gpu_worker_plan`.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from harness.evaluation.errors import InfraError

_GPU_NODE = re.compile(r"nvidia(\d+)")
AGENT_GPUS_ENV = "EVOBENCH_AGENT_GPUS"
"""Host GPU numbers (comma-separated) a run's agent keeps for its policy: never given to evaluations."""
EVAL_FRACTION_ENV = "EVOBENCH_EVAL_GPU_FRACTION"
"""Share of a GPU each evaluation process may allocate, where evaluations share a GPU with the agent."""


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


def evaluation_pool(pool: list[int], env: dict[str, str] | None = None) -> list[int]:
    """The GPUs of ``pool`` evaluations may use: all but those :data:`AGENT_GPUS_ENV` keeps.

    Where the agent keeps every GPU (one GPU, shared under a memory plan), the plan leaves it out
    of the variable and evaluations share the agent's GPU.
    """
    env = dict(os.environ) if env is None else env
    kept = {int(v) for v in env.get(AGENT_GPUS_ENV, "").split(",") if v.strip().isdigit()}
    return [g for g in pool if g not in kept]


def eval_memory_fraction(env: dict[str, str] | None = None) -> float | None:
    """The per-process GPU memory share of evaluation processes (:data:`EVAL_FRACTION_ENV`; None: whole GPU).

    Raises:
        InfraError: If the variable is set but is not a number in (0, 1].
    """
    env = dict(os.environ) if env is None else env
    text = env.get(EVAL_FRACTION_ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0.0 < value <= 1.0:
        raise InfraError(f"{EVAL_FRACTION_ENV}={text!r}: need a share of the GPU in (0, 1]")
    return value


def gpu_memory_totals(timeout_s: float = 20.0) -> dict[int, int]:
    """Total memory in bytes of each GPU, by ``nvidia-smi`` index (empty: no driver / no GPU).

    Read through ``nvidia-smi`` so that the caller's process does not start CUDA (a CUDA context
    in ``bench run`` before its workers start would be inherited broken by forked children).
    """
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=timeout_s, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    return parse_memory_totals(out.stdout)


def parse_memory_totals(text: str) -> dict[int, int]:
    """``index, MiB`` lines of ``nvidia-smi --query-gpu=index,memory.total`` as {index: bytes}."""
    totals: dict[int, int] = {}
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            totals[int(parts[0])] = int(parts[1]) * 1024 * 1024
    return totals


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
