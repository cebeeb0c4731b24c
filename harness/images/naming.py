"""Image names: content-addressed tags so a changed scorer, recipe or harness forces a rebuild."""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

from harness.envs.registry import Variant

REPO_PREFIX = "evobench"
IMAGES_DIR_NAME = "images"


def project_root() -> Path:
    """The source tree holding ``harness/``, ``environments/`` and ``images/``."""
    return Path(__file__).resolve().parents[2]


def images_dir() -> Path:
    """Directory of the Dockerfiles (``images/``)."""
    return project_root() / IMAGES_DIR_NAME


@cache
def harness_hash() -> str:
    """Hash of the trusted code that runs inside images.

    Covers ``harness/`` sources, pyproject and the env layer's recipe (which sets what
    candidates may read), so a change to any of them forces new variant images.
    """
    root = project_root()
    h = hashlib.sha256()
    files = sorted((root / "harness").rglob("*.py")) + [root / "pyproject.toml"]
    files.append(images_dir() / "env" / "Dockerfile")
    for p in files:
        h.update(str(p.relative_to(root)).encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:10]


def recipe_hash(kind: str, build_args: dict[str, str]) -> str:
    """Hash of a base image recipe (its Dockerfile and build arguments)."""
    h = hashlib.sha256((images_dir() / kind / "Dockerfile").read_bytes())
    for k in sorted(build_args):
        h.update(f"{k}={build_args[k]}".encode())
    return h.hexdigest()[:10]


BASE_KINDS = {"cpu": "base-cpu", "cuda": "base-cuda"}
"""The manifest's ``image`` values and the base recipe (``images/<kind>``) each selects."""


def base_kind(variant: Variant) -> str:
    """The base recipe a variant's image is built on: ``base-cuda`` or ``base-cpu``.

    A variant that requests GPUs always gets ``base-cuda`` (a CPU torch build cannot use them),
    whatever its ``image`` says; otherwise ``image`` picks the recipe.

    Raises:
        ValueError: If ``image`` names no known base recipe.
    """
    if variant.image not in BASE_KINDS:
        raise ValueError(
            f"variant {variant.id}: image = {variant.image!r} is not one of {sorted(BASE_KINDS)}"
        )
    return "base-cuda" if variant.hardware.gpu_count > 0 else BASE_KINDS[variant.image]


def env_image_tag(variant: Variant) -> str:
    """``evobench/env-<variant>:<env hash>-<harness hash>``: the image a variant evaluates in.

    A derived subset variant (``<id>~subset-<seed>-<size>``) is named by its base id and base
    hash, so it runs in the base variant's image: the subset is a scorer parameter only.
    """
    return f"{REPO_PREFIX}/env-{variant.base_id}:{variant.base_hash}-{harness_hash()}"


def base_image_tag(kind: str, build_args: dict[str, str]) -> str:
    """Tag of a built base image (``kind`` is ``base-cpu`` or ``base-cuda``)."""
    return f"{REPO_PREFIX}/{kind}:{recipe_hash(kind, build_args)}"


BOOTSTRAP_TAG = f"{REPO_PREFIX}/debian-bootstrap:bookworm"
"""Tag of the base made with debootstrap + docker import (machines without registry access)."""
