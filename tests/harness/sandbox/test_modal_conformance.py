"""The backend conformance suite run against the Modal backend, through a Docker-backed fake client.

Modal's servers cannot be reached here; ``FakeModalClient`` runs the same image in Docker behind
the client interface the backend uses (stdin / stdout protocol lines, tags, terminate).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from harness.envs.registry import default_registry
from harness.evaluation.result import Status
from harness.sandbox.modal_backend import ModalBackend

from .conformance import ENV_ID, HONEST, SandboxConformance, describe
from .docker_support import docker_client_or_skip, require_image
from .modal_fake import FakeModalClient

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def fake_client() -> FakeModalClient:
    client = docker_client_or_skip()
    require_image(client, default_registry().get(ENV_ID))
    return FakeModalClient()


@pytest.fixture(scope="module")
def modal_backend(fake_client: FakeModalClient) -> Iterator[ModalBackend]:
    backend = ModalBackend(workers=2, mode="warm", client=fake_client, run_id="conformance")
    yield backend
    backend.close()
    assert backend.sandboxes() == []


class TestModalWarm(SandboxConformance):
    processes_visible_on_host = True  # the fake's containers run on this host's kernel
    supports_env_root = False  # images carry their own environments
    trusted_side_inherits_env = False  # sandboxes get no host environment at all

    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, modal_backend: ModalBackend) -> ModalBackend:
        return modal_backend

    def make_backend(self, **overrides: Any) -> ModalBackend:
        overrides.pop("env_root", None)
        return ModalBackend(**{"workers": 2, "mode": "warm", "client": FakeModalClient(), **overrides})


def test_cold_sandbox_per_evaluation(fake_client: FakeModalClient) -> None:
    variant = default_registry().get(ENV_ID)
    before = len(fake_client.specs)
    with ModalBackend(workers=1, mode="cold", client=fake_client) as b:
        results = [b.evaluate(variant, HONEST) for _ in range(2)]
        assert b.sandboxes() == []  # each cold sandbox is gone once its evaluation returns
    assert [r.status for r in results] == [Status.OK, Status.OK], describe(results[0])
    assert all(r.backend == "modal" for r in results)
    assert len(fake_client.specs) - before == 2


def test_lost_sandbox_is_infra_error_and_retried(fake_client: FakeModalClient) -> None:
    variant = default_registry().get(ENV_ID)
    with ModalBackend(workers=1, mode="warm", client=fake_client, infra_retries=1) as b:
        assert b.evaluate(variant, HONEST).status is Status.OK
        for sb in fake_client.sandboxes:
            if sb.tags.get("evobench.backend") == b.id:
                sb.terminate()  # lost mid-run, as when Modal preempts a sandbox
        res = b.evaluate(variant, HONEST)
    # The dead warm sandbox surfaces as an infra error, then the retry starts a fresh one.
    assert res.status is Status.OK, describe(res)
    assert res.attempts == 2


def test_missing_image_is_infra_error() -> None:
    variant = default_registry().get(ENV_ID)
    client = FakeModalClient()
    with ModalBackend(workers=1, mode="cold", client=client, infra_retries=0) as b:
        # Stage the recipe, then point it at an image that does not exist.
        b._recipes[variant.id] = dataclasses.replace(b._recipe(variant), tag="evobench/missing:none")
        res = b.evaluate(variant, HONEST)
    assert res.status is Status.INFRA_ERROR
    assert "ImageBuildError" in res.reason
