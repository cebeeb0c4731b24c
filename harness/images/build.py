"""Build evobench images with docker-py: bootstrap base, CPU / CUDA base, per-variant env images."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.envs.registry import Variant

from .naming import BOOTSTRAP_TAG, base_image_tag, env_image_tag, images_dir, project_root

log = logging.getLogger(__name__)
DEFAULT_BASE = {"base-cpu": "python:3.11-slim", "base-cuda": "python:3.11-slim-bookworm"}
DEFAULT_TORCH_INDEX = {
    "base-cpu": "https://download.pytorch.org/whl/cpu",
    # PyPI's own torch wheel is the CUDA build (with the CUDA user-space libraries as wheels).
    "base-cuda": "",
}
BOOTSTRAP_PACKAGES = "python3,python3-venv,g++,ca-certificates,util-linux"
_PROJECT_ITEMS = ("pyproject.toml", "README.md", "harness", "environments", "agents", "evobench")
COPIED_FOLDERS = ("ca", "wheels")
"""Context folders the base recipes ``COPY`` (possibly empty: no extra CA, no wheelhouse)."""
KEEP_FILE = ".evobench-keep"


class ImageBuildError(RuntimeError):
    """A build failed; the message carries the tail of the build log."""


@dataclass(frozen=True)
class BuildOptions:
    """How to build base images on this machine."""

    base_image: str | None = None
    """FROM image of the base (default: a public slim Python / CUDA image)."""
    extra_ca: Path | None = None
    """PEM bundle to trust inside the build (corporate TLS interception)."""
    wheelhouse: Path | None = None
    """Directory of wheels to install from first (air-gapped machines; torch CPU wheel)."""
    torch_spec: str = "torch==2.13.0"
    """Requirement for torch."""


def docker_client() -> Any:
    """A docker-py client.

    Raises:
        ImageBuildError: If the daemon is not reachable.
    """
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:  # noqa: BLE001 - docker raises several unrelated types here
        raise ImageBuildError(f"Docker daemon not reachable ({e}); start dockerd or set DOCKER_HOST") from e
    return client


def _stage_context(kind: str, opts: BuildOptions | None, with_project: bool) -> Path:
    ctx = Path(tempfile.mkdtemp(prefix="evobench-build-"))
    shutil.copy(images_dir() / kind / "Dockerfile", ctx / "Dockerfile")
    for folder in COPIED_FOLDERS:
        (ctx / folder).mkdir()
        # Modal uploads the files a COPY names, never empty folders: without a file the COPY fails.
        (ctx / folder / KEEP_FILE).write_text("placeholder: Modal uploads files, not folders\n")
    if opts and opts.extra_ca:
        shutil.copy(opts.extra_ca, ctx / "ca" / "extra-ca.crt")
    if opts and opts.wheelhouse:
        for whl in Path(opts.wheelhouse).glob("*.whl"):
            os.link(whl, ctx / "wheels" / whl.name) if _same_fs(whl, ctx) else shutil.copy(
                whl, ctx / "wheels"
            )
    if with_project:
        root = project_root()
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
        for item in _PROJECT_ITEMS:
            src = root / item
            if src.is_dir():
                shutil.copytree(src, ctx / "project" / item, ignore=ignore)
            elif src.is_file():
                (ctx / "project").mkdir(exist_ok=True)
                shutil.copy(src, ctx / "project" / item)
    return ctx


def _same_fs(a: Path, b: Path) -> bool:
    return a.stat().st_dev == b.stat().st_dev


def _build(client: Any, ctx: Path, tag: str, buildargs: dict[str, str], echo: Callable[[str], None]) -> str:
    from docker.errors import BuildError

    try:
        _, logs = client.images.build(
            path=str(ctx), tag=tag, buildargs=buildargs, rm=True, forcerm=True, network_mode="host"
        )
        for chunk in logs:
            line = str(chunk.get("stream", "")).rstrip()
            if line:
                echo(line)
    except BuildError as e:
        tail = "\n".join(str(c.get("stream", c.get("error", ""))).rstrip() for c in list(e.build_log)[-25:])
        raise ImageBuildError(f"building {tag} failed: {e.msg}\n{tail}") from e
    finally:
        shutil.rmtree(ctx, ignore_errors=True)
    return tag


def base_build_args(kind: str, opts: BuildOptions) -> dict[str, str]:
    """Build arguments of a base image (also the input of its tag)."""
    base = opts.base_image or DEFAULT_BASE[kind]
    url = DEFAULT_TORCH_INDEX[kind]
    index = f"--extra-index-url {url}" if url and not opts.wheelhouse else ""
    args = {"BASE_IMAGE": base, "TORCH_SPEC": opts.torch_spec, "PIP_EXTRA_ARGS": index}
    if opts.wheelhouse:
        args["WHEELS"] = ",".join(sorted(p.name for p in Path(opts.wheelhouse).glob("*.whl")))
    if opts.extra_ca:
        args["EXTRA_CA_SHA"] = __import__("hashlib").sha256(Path(opts.extra_ca).read_bytes()).hexdigest()[:12]
    return args


def image_exists(client: Any, tag: str) -> bool:
    """Whether the daemon has an image with this tag."""
    from docker.errors import ImageNotFound

    try:
        client.images.get(tag)
        return True
    except ImageNotFound:
        return False


def build_base(kind: str, opts: BuildOptions, echo: Callable[[str], None] = log.info) -> str:
    """Build (or reuse) a base image.

    Raises:
        ImageBuildError: If the daemon is down or the build fails.
    """
    client = docker_client()
    args = base_build_args(kind, opts)
    tag = base_image_tag(kind, args)
    if image_exists(client, tag):
        echo(f"{tag}: up to date")
        return tag
    return _build(client, _stage_context(kind, opts, with_project=False), tag, args, echo)


def build_env_image(variant: Variant, base_tag: str, echo: Callable[[str], None] = log.info) -> str:
    """Build (or reuse) the image of one variant on top of a base image.

    Raises:
        ImageBuildError: If the daemon is down or the build fails.
    """
    client = docker_client()
    tag = env_image_tag(variant)
    if image_exists(client, tag):
        echo(f"{tag}: up to date")
        return tag
    ctx = _stage_context("env", None, with_project=True)
    return _build(client, ctx, tag, {"BASE_IMAGE": base_tag, "ENV_ID": variant.base_id}, echo)


def bootstrap_base(
    cache_dir: Path,
    mirror: str = "http://deb.debian.org/debian",
    suite: str = "bookworm",
    echo: Callable[[str], None] = log.info,
) -> str:
    """Make a base image without any registry: ``debootstrap`` a Debian root, then ``docker import``.

    The root file system is kept as ``<cache_dir>/rootfs-<suite>.tar`` so later runs skip debootstrap.

    Raises:
        ImageBuildError: If debootstrap or the import fails.
    """
    client = docker_client()
    if image_exists(client, BOOTSTRAP_TAG):
        echo(f"{BOOTSTRAP_TAG}: up to date")
        return BOOTSTRAP_TAG
    cache_dir.mkdir(parents=True, exist_ok=True)
    tar = cache_dir / f"rootfs-{suite}.tar"
    if not tar.is_file():
        if shutil.which("debootstrap") is None:
            raise ImageBuildError("debootstrap is not installed (Debian: apt-get install debootstrap)")
        root = cache_dir / f"rootfs-{suite}"
        shutil.rmtree(root, ignore_errors=True)
        echo(f"debootstrap {suite} into {root} (a few minutes)")
        _run(
            ["debootstrap", "--variant=minbase", f"--include={BOOTSTRAP_PACKAGES}", suite, str(root), mirror]
        )
        _run(["tar", "-C", str(root), "-cf", str(tar) + ".part", "."])
        os.replace(str(tar) + ".part", tar)
        shutil.rmtree(root, ignore_errors=True)
    echo(f"docker import {tar} -> {BOOTSTRAP_TAG}")
    repo, tag = BOOTSTRAP_TAG.split(":")
    client.api.import_image_from_file(
        str(tar),
        repository=repo,
        tag=tag,
        changes=["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    )
    return BOOTSTRAP_TAG


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise ImageBuildError(f"{' '.join(cmd[:3])} ... failed:\n{proc.stderr[-3000:]}")
