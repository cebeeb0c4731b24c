"""What a variant asks of Modal: GPU string, resources, timeouts, tags, image recipe."""

from __future__ import annotations

import math

from harness.envs.registry import Variant
from harness.envs.secret import KEY_ENV, key_env_value
from harness.hardware.gpu_models import MODELS
from harness.hardware.gpu_models import model as gpu_model
from harness.images.naming import env_image_tag

from .client import SandboxSpec

APP_NAME = "evobench"
TAG = "evobench"
TRUSTED_OVERHEAD_MB = 1536
"""Memory of the in-sandbox trusted server (torch imported), added to the candidate's limit."""
START_ALLOWANCE_S = 600
"""Sandbox lifetime beyond the evaluations themselves: image pull, imports, zygote start."""
WARM_EVALUATIONS = 1000
"""Evaluations a warm sandbox's lifetime is sized for (Modal caps one sandbox at 24 h anyway)."""
MAX_LIFETIME_S = 24 * 3600


def gpu_string(variant: Variant) -> str | None:
    """Modal's ``TYPE[:COUNT]`` for the variant's GPUs, or None for CPU variants.

    The type is the one that gets exactly the variant's model and form factor
    (``harness.hardware.gpu_models``): ``H100!`` (plain ``H100`` may be upgraded to an H200, Modal's
    GPU guide), ``A100-80GB`` (plain ``A100`` is the 40 GB card); the scorer refuses any other.

    Raises:
        ValueError: If the variant asks for GPUs without naming a model, or Modal does not offer
            its model.
    """
    hw = variant.hardware
    if hw.gpu_count <= 0:
        return None
    if not hw.gpu:
        raise ValueError(f"variant {variant.id} requests {hw.gpu_count} GPU(s) but names no GPU type")
    kind = gpu_model(hw.gpu).modal
    if not kind:
        offered = ", ".join(m.key for m in MODELS.values() if m.modal)
        raise ValueError(f"variant {variant.id} needs an {hw.gpu}; Modal offers none (it offers {offered})")
    return kind if hw.gpu_count == 1 else f"{kind}:{hw.gpu_count}"


def sandbox_spec(
    variant: Variant,
    *,
    slot: int,
    backend_id: str,
    run_id: str = "",
    warm: bool,
    idle_timeout_s: int = 300,
) -> SandboxSpec:
    """The ``Sandbox.create`` arguments for one worker slot (warm) or one evaluation (cold)."""
    per_eval = math.ceil(variant.timeout_s) + 60
    lifetime = START_ALLOWANCE_S + (per_eval * WARM_EVALUATIONS if warm else per_eval)
    # -P: never import from the working directory (/sandbox), which candidates can write to.
    server = ("python", "-P", "-m", "harness.sandbox.container_main", "--stdio")
    command: tuple[str, ...] = (*server, "--slot", str(slot), "--prewarm", variant.id)
    tags = {TAG: "1", f"{TAG}.backend": backend_id, f"{TAG}.variant": variant.id}
    if run_id:
        tags[f"{TAG}.run"] = run_id
    return SandboxSpec(
        command=command,
        app_name=APP_NAME,
        gpu=gpu_string(variant),
        cpu=max(float(variant.hardware.cpus), 1.0),
        memory_mb=variant.hardware.memory_mb + TRUSTED_OVERHEAD_MB,
        disk_mb=variant.hardware.disk_mb,
        timeout_s=min(lifetime, MAX_LIFETIME_S),
        # An idle warm sandbox must outlive the gap between two evaluations of a slow agent, but
        # never bill for long once the host is gone; a cold one is busy from its first second.
        idle_timeout_s=max(idle_timeout_s, per_eval) if warm else per_eval,
        block_network=True,
        tags=tuple(sorted(tags.items())),
        # Secret held-out draws with this installation's key, so Modal scores like local and Docker.
        env=((KEY_ENV, key_env_value()),),
    )


def image_tag(variant: Variant) -> str:
    """The content-addressed tag shared with the Docker backend (one recipe, one identity)."""
    return env_image_tag(variant)
