"""Shared fixtures: CI strictness for docker tests, isolated results / leaderboard dirs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip docker / gpu tests where they cannot run, except docker under CI=true (a failure there)."""
    in_ci = os.environ.get("CI", "").lower() == "true"
    have_docker = shutil.which("docker") is not None and os.path.exists("/var/run/docker.sock")
    for item in items:
        # Markers, not keywords: keywords hold every parent folder's name (a checkout in .../gpu).
        if item.get_closest_marker("docker") and not have_docker and not in_ci:
            item.add_marker(pytest.mark.skip(reason="no Docker daemon (set CI=true to make this a failure)"))
        if item.get_closest_marker("gpu"):
            try:
                import torch

                has_gpu = torch.cuda.is_available()
            except ImportError:
                has_gpu = False
            if not has_gpu:
                item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A scratch cwd so runs write results/ and leaderboards/ there, not into the repo."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` (real public data for tests); skipped when absent outside CI."""
    d = SHARED / "data"
    if not d.is_dir():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{d} is missing in CI")
        pytest.skip(f"{d} not present")
    return d
