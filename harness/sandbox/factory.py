"""Choose an evaluation backend by name."""

from __future__ import annotations

from typing import Literal

from .base import Sandbox
from .worker import Mode

BackendName = Literal["local", "docker", "modal"]


class BackendUnavailable(RuntimeError):
    """The requested backend cannot be used here (not installed or not implemented)."""


def make_backend(
    name: BackendName, *, workers: int | None, mode: Mode = "warm", prewarm: tuple[str, ...] = ()
) -> Sandbox:
    """Create a backend.

    Raises:
        BackendUnavailable: If the backend is not available.
    """
    if name == "local":
        from .local import LocalBackend

        return LocalBackend(workers=workers, mode=mode, prewarm=prewarm)
    if name == "docker":
        try:
            import docker  # noqa: F401
        except ImportError as e:
            raise BackendUnavailable(
                "the docker backend needs docker-py: pip install 'evobench[docker]'"
            ) from e
        from .docker_backend import DockerBackend

        return DockerBackend(workers=workers, mode=mode, prewarm=prewarm)
    raise BackendUnavailable(f"backend {name!r} is not available in this version; use --backend local")
