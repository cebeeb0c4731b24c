"""Fixtures shared by the environment families' tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def local_backend() -> Iterator[object]:
    """One local sandbox backend (one worker) per test module."""
    from harness.sandbox.local import LocalBackend

    with LocalBackend(workers=1) as b:
        yield b
