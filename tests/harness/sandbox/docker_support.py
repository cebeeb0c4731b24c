"""Shared helpers of the Docker tests: daemon and image availability (fail under CI=true)."""

from __future__ import annotations

import os

import pytest

from harness.envs.registry import Variant

IN_CI = os.environ.get("CI", "").lower() == "true"


def docker_client_or_skip():  # type: ignore[no-untyped-def]
    """A docker-py client; outside CI a missing daemon skips, in CI it fails."""
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as e:  # noqa: BLE001
        if IN_CI:
            pytest.fail(f"CI=true but no Docker daemon: {e}")
        pytest.skip(f"no Docker daemon: {e}")


def require_image(client, variant: Variant) -> str:  # type: ignore[no-untyped-def]
    """The variant's image tag; missing outside CI skips with the command that builds it."""
    from docker.errors import ImageNotFound

    from harness.images.naming import env_image_tag

    tag = env_image_tag(variant)
    try:
        client.images.get(tag)
    except ImageNotFound:
        msg = (
            f"image {tag} not built; run `bash scripts/docker-setup.sh` "
            f"or `bench images build --env {variant.id}`"
        )
        if IN_CI:
            pytest.fail(msg)
        pytest.skip(msg)
    return tag
