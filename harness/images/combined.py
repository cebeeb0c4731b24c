"""One Dockerfile for a variant: the base recipe followed by the env layer.

Docker builds a variant in two steps (base image, then ``images/env`` ``FROM`` that tag). Remote
builders such as Modal's see no local tags, so they get the same two recipes joined into one
file: the base Dockerfile unchanged, then the env Dockerfile without its ``ARG BASE_IMAGE`` and
``FROM`` lines. The context is staged exactly as for Docker (``project/``, ``ca/``, ``wheels/``).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.envs.registry import Variant

from .build import BuildOptions, _stage_context, base_build_args
from .naming import base_kind, images_dir

__all__ = ["base_kind", "combined_dockerfile", "remove_context", "stage_combined", "stage_run"]


def combined_dockerfile(kind: str, layer: str = "env") -> str:
    """The base recipe ``kind`` followed by a layer (``env``, or ``run``), its own ``FROM`` removed.

    Raises:
        ValueError: If the layer's Dockerfile has no ``FROM`` line to drop (the recipes changed shape).
    """
    base = (images_dir() / kind / "Dockerfile").read_text(encoding="utf-8")
    env_lines = (images_dir() / layer / "Dockerfile").read_text(encoding="utf-8").splitlines()
    kept = [ln for ln in env_lines if not ln.startswith(("FROM ", "ARG BASE_IMAGE"))]
    if len(kept) == len(env_lines):
        raise ValueError(f"images/{layer}/Dockerfile has no FROM line; cannot join it to a base recipe")
    head = f"\n\n# --- {layer} layer (images/{layer}/Dockerfile) ---\n"
    return base.rstrip("\n") + head + "\n".join(kept) + "\n"


def stage_combined(variant: Variant, opts: BuildOptions | None = None) -> tuple[Path, Path, dict[str, str]]:
    """Stage a build context and combined Dockerfile for ``variant``.

    Returns:
        ``(context_dir, dockerfile, build_args)``; the caller removes ``context_dir`` when done.
    """
    kind = base_kind(variant)
    opts = opts or BuildOptions()
    ctx = _stage_context(kind, opts, with_project=True)
    dockerfile = ctx / "Dockerfile"
    dockerfile.write_text(combined_dockerfile(kind), encoding="utf-8")
    args = {**base_build_args(kind, opts), "ENV_ID": variant.base_id}
    return ctx, dockerfile, args


def stage_run(
    gpu: bool, extras: str = "", opts: BuildOptions | None = None
) -> tuple[Path, Path, dict[str, str]]:
    """Stage the image of a run placed on Modal: a base recipe, then ``images/run``.

    Args:
        gpu: Build on ``base-cuda`` (a GPU container) instead of ``base-cpu``.
        extras: Optional dependencies to install (default ``modal,rl``, plus ``gpu`` with a GPU).
        opts: Base image options (extra CA, wheelhouse, torch pin).

    Returns:
        ``(context_dir, dockerfile, build_args)``; the caller removes ``context_dir`` when done.
    """
    kind = "base-cuda" if gpu else "base-cpu"
    opts = opts or BuildOptions()
    ctx = _stage_context(kind, opts, with_project=True)
    # The run's own evaluations (Modal backend) stage their images from these recipes.
    shutil.copytree(images_dir(), ctx / "project" / images_dir().name)
    dockerfile = ctx / "Dockerfile"
    dockerfile.write_text(combined_dockerfile(kind, "run"), encoding="utf-8")
    extras = extras or ("modal,rl,gpu" if gpu else "modal,rl")
    return ctx, dockerfile, {**base_build_args(kind, opts), "RUN_EXTRAS": extras}


def remove_context(ctx: Path) -> None:
    """Delete a staged context."""
    shutil.rmtree(ctx, ignore_errors=True)
