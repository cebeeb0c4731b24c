"""The backend conformance suite run against the local backend, warm and cold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from harness.sandbox.local import LocalBackend

from .conformance import SandboxConformance


@pytest.fixture(scope="module")
def warm_backend() -> Iterator[LocalBackend]:
    backend = LocalBackend(workers=2, mode="warm")
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def cold_backend() -> Iterator[LocalBackend]:
    backend = LocalBackend(workers=1, mode="cold")
    yield backend
    backend.close()


class TestLocalWarm(SandboxConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, warm_backend: LocalBackend) -> LocalBackend:
        return warm_backend

    def make_backend(self, **overrides: Any) -> LocalBackend:
        return LocalBackend(**{"workers": 2, "mode": "warm", **overrides})


class TestLocalCold(SandboxConformance):
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls, cold_backend: LocalBackend) -> LocalBackend:
        return cold_backend

    def make_backend(self, **overrides: Any) -> LocalBackend:
        return LocalBackend(**{"workers": 1, "mode": "cold", **overrides})
