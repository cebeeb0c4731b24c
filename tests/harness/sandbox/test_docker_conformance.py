"""The backend conformance suite run against the Docker backend (warm containers)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.envs.registry import default_registry
from harness.sandbox.docker_backend import DockerBackend

from .conformance import ENV_ID, SandboxConformance
from .docker_support import docker_client_or_skip, require_image

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def docker_backend() -> Iterator[DockerBackend]:
    client = docker_client_or_skip()
    require_image(client, default_registry().get(ENV_ID))
    # Prewarmed: each container forks its zygote after importing once (prefork, as cold containers
    # do); after an anomaly it is restarted the ordinary way (exec). Fresh backends from
    # make_backend below start their zygotes the ordinary way from the start.
    backend = DockerBackend(workers=2, mode="warm", prewarm=(ENV_ID,))
    yield backend
    backend.close()
    assert backend.containers() == []


class TestDockerWarm(SandboxConformance):
    supports_env_root = False  # images carry their own environments; another root needs another image
    trusted_side_inherits_env = False  # containers get no host environment at all

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, docker_backend: DockerBackend) -> DockerBackend:
        return docker_backend

    def make_backend(self, **overrides: Any) -> DockerBackend:
        overrides.pop("env_root", None)
        return DockerBackend(**{"workers": 2, "mode": "warm", **overrides})
