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

__all__ = ["base_kind", "combined_dockerfile", "remove_context", "stage_combined"]


def combined_dockerfile(kind: str) -> str:
    """The base recipe ``kind`` followed by the env layer (its own ``FROM`` removed).

    Raises:
        ValueError: If the env Dockerfile has no ``FROM`` line to drop (the recipes changed shape).
    """
    base = (images_dir() / kind / "Dockerfile").read_text(encoding="utf-8")
    env_lines = (images_dir() / "env" / "Dockerfile").read_text(encoding="utf-8").splitlines()
    kept = [ln for ln in env_lines if not ln.startswith(("FROM ", "ARG BASE_IMAGE"))]
    if len(kept) == len(env_lines):
        raise ValueError("images/env/Dockerfile has no FROM line; cannot join it to a base recipe")
    return base.rstrip("\n") + "\n\n# --- env layer (images/env/Dockerfile) ---\n" + "\n".join(kept) + "\n"


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


def remove_context(ctx: Path) -> None:
    """Delete a staged context."""
    shutil.rmtree(ctx, ignore_errors=True)
