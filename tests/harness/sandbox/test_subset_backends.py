"""Derived subset ids travel through the local and Docker backends unchanged.

The worker / in-container server resolves ``<id>~subset-<seed>-<size>`` with ``Registry.get``; the
Docker backend runs it in the base variant's image and serves every subset of a base from the
base's warm container (a fresh subset per validation draw must not start a container each).
"""

from __future__ import annotations

import pytest

from harness.envs.registry import default_registry
from harness.evaluation.result import EvalResult, Status
from harness.sandbox.base import Sandbox

from .docker_support import docker_client_or_skip, require_image

IDS = ("eplb-tiny", "eplb-tiny~subset-1-2", "eplb-tiny~subset-2-3")


def _evaluate_all(backend: Sandbox) -> dict[str, EvalResult]:
    reg = default_registry()
    out = {}
    for env_id in IDS:
        v = reg.get(env_id)
        r = backend.evaluate(v, v.initial_program)
        assert r.status is Status.OK, r.reason
        assert r.env_id == env_id and r.env_hash == v.hash
        out[env_id] = r
    return out


def _check(results: dict[str, EvalResult]) -> None:
    assert "subset_size" not in results["eplb-tiny"].metrics
    assert results["eplb-tiny~subset-1-2"].metrics["subset_size"] == 2.0
    assert results["eplb-tiny~subset-2-3"].metrics["subset_size"] == 3.0
    assert len({r.env_hash for r in results.values()}) == 3


@pytest.fixture(scope="module")
def local_results(local_warm_backend: Sandbox) -> dict[str, EvalResult]:
    return _evaluate_all(local_warm_backend)


def test_local_backend_evaluates_derived_ids(local_results: dict[str, EvalResult]) -> None:
    _check(local_results)
    assert {r.backend for r in local_results.values()} == {"local"}


@pytest.mark.docker
def test_docker_backend_evaluates_derived_ids_in_the_base_image(
    local_results: dict[str, EvalResult],
) -> None:
    from harness.sandbox.docker_backend import DockerBackend

    client = docker_client_or_skip()
    base = default_registry().get("eplb-tiny")
    require_image(client, base)  # the subset variants' image is the base's: nothing else is built
    b = DockerBackend(workers=1, mode="warm")
    try:
        results = _evaluate_all(b)
        # One warm container (the base's) served the base and both subsets.
        assert len(b.containers()) == 1
    finally:
        b.close()
    assert b.containers() == []
    _check(results)
    for env_id, r in results.items():
        assert r.backend == "docker"
        assert r.metrics["balancedness_expert"] == local_results[env_id].metrics["balancedness_expert"]


@pytest.mark.docker
def test_modal_backend_serves_subsets_from_the_base_sandbox_and_recipe(
    local_results: dict[str, EvalResult],
) -> None:
    from harness.sandbox.modal_backend import ModalBackend

    from .modal_fake import FakeModalClient

    require_image(docker_client_or_skip(), default_registry().get("eplb-tiny"))
    fake = FakeModalClient()  # Modal's servers cannot be reached: the same image runs in Docker
    with ModalBackend(workers=1, mode="warm", client=fake) as b:
        results = _evaluate_all(b)
        assert set(b._recipes) == {"eplb-tiny"}
    assert len(fake.specs) == 1  # one warm sandbox, started for the base, served all three ids
    assert "--prewarm" in fake.specs[0].command and "eplb-tiny" in fake.specs[0].command
    _check(results)
    for env_id, r in results.items():
        assert r.metrics["balancedness_expert"] == local_results[env_id].metrics["balancedness_expert"]
