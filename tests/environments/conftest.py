"""Fixtures shared by the environment families' tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def local_backend(local_warm_backend: object) -> object:
    """The suite's shared warm local sandbox backend (one worker); see ``tests/conftest.py``."""
    return local_warm_backend
