"""The GPU kernel families' tiny variants in Docker: honest initial programs and hostile ones.

Each tiny variant (CPU torch, base-cpu image) must evaluate its initial program ``ok`` in a real
container, and a hostile candidate per family from ``tests/environments/hacks`` must get the same
verdict there as in the local sandbox. Build the images with ``bash scripts/docker-setup.sh``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from harness.envs.registry import default_registry
from harness.evaluation.result import Status
from harness.sandbox.docker_backend import DockerBackend

from ..harness.sandbox.docker_support import docker_client_or_skip, require_image
from .test_hacks import ALL, assert_verdict

pytestmark = pytest.mark.docker

TINY = ["trimul-tiny", "mla-decode-tiny", "kernelbench-tiny"]
# One hostile candidate per family: reading the scorer's files (root-only in the image), mutating
# the checker's weights, and patching the timer where the static filter cannot see it.
HOSTILE = [
    "trimul-tiny/read_scorer_files",
    "mla-decode-tiny/mutate_wo",
    "kernelbench-tiny/timing_patch_setattr",
]


@pytest.fixture(scope="module")
def backend() -> Iterator[DockerBackend]:
    client = docker_client_or_skip()
    for env_id in TINY:
        require_image(client, default_registry().get(env_id))
    b = DockerBackend(workers=1, mode="warm")
    yield b
    b.close()
    assert b.containers() == []


@pytest.mark.parametrize("env_id", TINY)
def test_initial_program_is_ok_in_docker(backend: DockerBackend, env_id: str) -> None:
    v = default_registry().get(env_id)
    res = backend.evaluate(v, v.initial_program)
    assert res.status is Status.OK, f"{env_id}: {res.status} {res.reason[:1000]}"
    assert res.backend == "docker" and res.score is not None and math.isfinite(res.score)
    assert res.metrics.get("timing_cpu") == 1.0  # CPU times, never ranked with GPU ones


@pytest.mark.parametrize("hack_id", HOSTILE)
def test_hostile_candidate_in_docker(backend: DockerBackend, hack_id: str) -> None:
    (hack,) = [h for h in ALL if h.id == hack_id]
    v = default_registry().get(hack.variant_id)
    res = backend.evaluate(v, hack.source(v))
    assert_verdict(hack, v, res, lambda: backend.evaluate(v, v.initial_program))
