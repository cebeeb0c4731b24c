"""``bench images``: build, list and bootstrap the Docker images environments evaluate in."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import tyro
from rich.table import Table

from harness.envs.registry import default_registry

from .console import console, err_console

DEFAULT_CACHE = Path("/var/cache/evobench")


def images(
    action: tyro.conf.Positional[Literal["build", "list", "bootstrap-base"]],
    env: str | None = None,
    all_envs: bool = False,
    base_image: str | None = None,
    extra_ca: Path | None = None,
    wheelhouse: Path | None = None,
    torch_spec: str = "torch==2.13.0",
    cache_dir: Path = DEFAULT_CACHE,
    mirror: str = "http://deb.debian.org/debian",
) -> int:
    """Build the image a variant evaluates in, list images, or bootstrap a base without a registry.

    Examples:
      bench images bootstrap-base                       # debootstrap + docker import (no registry)
      bench images build --env eplb-tiny --base-image evobench/debian-bootstrap:bookworm
          --extra-ca /etc/ssl/certs/ca-certificates.crt --wheelhouse /opt/wheels  (one line)
      bench images build --all

    Args:
        action: ``build`` (base + variant images), ``list``, or ``bootstrap-base``.
        env: Variant id to build (``build``).
        all_envs: Build every variant (``build``).
        base_image: FROM image of the base (default: a public slim Python / CUDA image).
        extra_ca: PEM bundle trusted inside builds (corporate proxies with TLS interception).
        wheelhouse: Directory of wheels preferred over the index (air-gapped; a local CPU torch wheel).
        torch_spec: torch requirement installed in the base.
        cache_dir: Where ``bootstrap-base`` keeps its root file system tarball between runs.
        mirror: Debian mirror for ``bootstrap-base``.
    """
    from harness.images.build import (
        BuildOptions,
        ImageBuildError,
        bootstrap_base,
        build_base,
        build_env_image,
    )
    from harness.images.naming import REPO_PREFIX, base_kind, env_image_tag

    reg = default_registry()
    try:
        if action == "bootstrap-base":
            tag = bootstrap_base(cache_dir, mirror=mirror, echo=console.print)
            console.print(f"base ready: {tag}\nnext: bench images build --env <id> --base-image {tag}")
            return 0
        if action == "list":
            from harness.images.build import docker_client, image_exists

            client = docker_client()
            t = Table(title="evobench images")
            for col in ("variant", "image", "built"):
                t.add_column(col)
            for v in reg.variants():
                tag = env_image_tag(v)
                t.add_row(v.id, tag, "yes" if image_exists(client, tag) else "no")
            console.print(t)
            others = [
                tag for img in client.images.list() for tag in img.tags if tag.startswith(REPO_PREFIX + "/")
            ]
            console.print("all evobench tags: " + (", ".join(sorted(others)) or "none"))
            return 0
        if not (env or all_envs):
            err_console.print("bench: error: images build needs --env ID or --all")
            return 2
        variants = reg.variants() if all_envs else [reg.get(env or "")]
        opts = BuildOptions(
            base_image=base_image, extra_ca=extra_ca, wheelhouse=wheelhouse, torch_spec=torch_spec
        )
        bases: dict[str, str] = {}
        for v in variants:
            kind = base_kind(v)
            if kind not in bases:
                console.print(f"building {kind} ...")
                bases[kind] = build_base(kind, opts, echo=lambda line: None)
            tag = build_env_image(v, bases[kind], echo=lambda line: None)
            console.print(f"{v.id}: {tag}")
        return 0
    except ImageBuildError as e:
        err_console.print(f"bench: error: {e}")
        return 3
    except ValueError as e:  # a manifest naming an unknown image recipe
        err_console.print(f"bench: error: {e}")
        return 2
