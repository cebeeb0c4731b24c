"""Choose an evaluation backend by name."""

from __future__ import annotations

from .base import Sandbox
from .names import BackendName, Mode


class BackendUnavailable(RuntimeError):
    """The requested backend cannot be used here (not installed or not implemented)."""


def check_backend(name: BackendName) -> None:
    """Fail fast, before a run directory exists, where a backend cannot work at all here.

    Raises:
        BackendUnavailable: If the backend's package or (Modal) credentials are missing.
    """
    if name == "modal":
        from .modal_backend.client import ModalInfraError
        from .modal_backend.sdk import SdkModalClient

        try:
            SdkModalClient().check_credentials()
        except ModalInfraError as e:
            raise BackendUnavailable(f"the modal backend cannot start: {e}") from e


def make_backend(
    name: BackendName,
    *,
    workers: int | None,
    mode: Mode = "warm",
    prewarm: tuple[str, ...] = (),
    run_id: str = "",
) -> Sandbox:
    """Create a backend.

    Args:
        name: ``local``, ``docker`` or ``modal``.
        workers: Parallel evaluations (None: the backend's default).
        mode: ``warm`` or ``cold``.
        prewarm: Variant ids to start eagerly.
        run_id: Tag remote resources with this run (Modal sandboxes).

    Raises:
        BackendUnavailable: If the backend cannot be used here (missing package or credentials).
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
    if name == "modal":
        from .modal_backend import ModalBackend, ModalInfraError

        try:
            return ModalBackend(workers=workers, mode=mode, prewarm=prewarm, run_id=run_id)
        except ModalInfraError as e:
            raise BackendUnavailable(f"the modal backend cannot start: {e}") from e
    raise BackendUnavailable(f"unknown backend {name!r}; use local, docker or modal")
