"""Which base recipe each variant's image is built on, and the CUDA recipe's build arguments."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest

from harness.envs.registry import default_registry
from harness.images.build import DEFAULT_BASE, DEFAULT_TORCH_INDEX, BuildOptions, base_build_args
from harness.images.combined import combined_dockerfile, remove_context, stage_combined
from harness.images.naming import base_kind, env_image_tag, images_dir

GPU_KERNEL_VARIANTS = ["trimul-h100", "trimul-a100", "mla-decode-h200"]
TINY_KERNEL_VARIANTS = ["trimul-tiny", "mla-decode-tiny", "kernelbench-tiny"]


@pytest.mark.parametrize("env_id", GPU_KERNEL_VARIANTS)
def test_gpu_kernel_variants_build_on_base_cuda(env_id: str) -> None:
    v = default_registry().get(env_id)
    assert v.image == "cuda" and base_kind(v) == "base-cuda"
    ctx, dockerfile, args = stage_combined(v)
    try:
        text = dockerfile.read_text(encoding="utf-8")
        assert text.startswith((images_dir() / "base-cuda" / "Dockerfile").read_text(encoding="utf-8"))
        assert args["BASE_IMAGE"] == DEFAULT_BASE["base-cuda"] and args["ENV_ID"] == env_id
        assert DEFAULT_TORCH_INDEX["base-cuda"] in args["PIP_EXTRA_ARGS"]
    finally:
        remove_context(ctx)


@pytest.mark.parametrize("env_id", TINY_KERNEL_VARIANTS)
def test_tiny_kernel_variants_build_on_base_cpu(env_id: str) -> None:
    v = default_registry().get(env_id)
    assert v.hardware.gpu_count == 0 and base_kind(v) == "base-cpu"


def test_every_variant_names_a_known_recipe_and_gpus_force_cuda() -> None:
    for v in default_registry().variants():
        kind = base_kind(v)
        assert (images_dir() / kind / "Dockerfile").is_file()
        if v.hardware.gpu_count:
            assert kind == "base-cuda", v.id  # CPU torch could not use the GPU


def test_unknown_image_recipe_is_rejected() -> None:
    v = dataclasses.replace(default_registry().get("trimul-tiny"), image="rocm")
    with pytest.raises(ValueError, match="'rocm' is not one of"):
        base_kind(v)


def test_base_cuda_recipe_declares_every_build_argument() -> None:
    """The arguments ``bench images build`` passes are the ones the CUDA recipe reads."""
    text = (images_dir() / "base-cuda" / "Dockerfile").read_text(encoding="utf-8")
    declared = set(re.findall(r"^ARG (\w+)", text, re.M))
    assert re.search(r"^FROM \$\{BASE_IMAGE\}$", text, re.M)
    opts = BuildOptions(extra_ca=None, wheelhouse=None)
    assert set(base_build_args("base-cuda", opts)) <= declared
    assert {"WHEELS", "EXTRA_CA_SHA"} <= declared
    # The env layer joins onto it for remote builders (one FROM only).
    assert combined_dockerfile("base-cuda").count("\nFROM ") + text.startswith("FROM ") <= 1


def test_env_recipe_is_part_of_the_image_tag(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Changing what candidates may read in the image (the env layer) forces new images."""
    from harness.images import naming

    v = default_registry().get("trimul-tiny")
    before = env_image_tag(v)
    root = naming.project_root()
    copy = tmp_path / "tree"
    shutil.copytree(root / "harness", copy / "harness", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(root / "images", copy / "images")
    shutil.copy(root / "pyproject.toml", copy / "pyproject.toml")
    monkeypatch.setattr(naming, "project_root", lambda: copy)
    naming.harness_hash.cache_clear()
    try:
        assert env_image_tag(v) == before  # same content, same tag
        naming.harness_hash.cache_clear()
        env = copy / "images" / "env" / "Dockerfile"
        env.write_text(env.read_text() + "RUN true\n")
        assert env_image_tag(v) != before
    finally:
        naming.harness_hash.cache_clear()
