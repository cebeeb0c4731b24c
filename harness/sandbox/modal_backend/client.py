"""The part of Modal's client the backend uses, as small typed interfaces.

The backend never imports ``modal`` itself: it talks to a :class:`ModalClient`. The real one
(:mod:`.sdk`) wraps the ``modal`` package; tests inject a fake that runs the same image in Docker.
Everything the backend asks of Modal is described by plain frozen dataclasses, so the objects
built for a variant (GPU string, resources, timeouts, tags) can be checked offline.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class ModalInfraError(RuntimeError):
    """Modal failed (credentials, quota, image build, a lost sandbox): never the candidate's fault.

    The message names the fix where one is known.
    """


@dataclass(frozen=True)
class ImageRecipe:
    """How to build a variant's image from the project's Dockerfiles (base + env layer in one file)."""

    variant_id: str
    """The variant the image evaluates."""
    tag: str
    """The content-addressed tag the Docker backend gives the same image (``env_image_tag``)."""
    dockerfile: Path
    """The combined Dockerfile (base recipe, then the env layer without its FROM)."""
    context_dir: Path
    """Build context holding ``project/``, ``ca/`` and ``wheels/`` as the Dockerfiles expect."""
    build_args: tuple[tuple[str, str], ...]
    """Build arguments, sorted by name."""


@dataclass(frozen=True)
class SandboxSpec:
    """Everything ``modal.Sandbox.create`` is called with for one evaluation sandbox."""

    command: tuple[str, ...]
    """Entrypoint: the in-sandbox trusted server in ``--stdio`` mode."""
    app_name: str
    """Modal app the sandboxes belong to (looked up, created if missing)."""
    gpu: str | None
    """Modal GPU string ``TYPE[:COUNT]`` (e.g. ``H100`` or ``H100:2``); None for CPU variants."""
    cpu: float
    """CPU cores requested."""
    memory_mb: int
    """Memory requested, MiB (candidate limit plus the trusted server's overhead)."""
    timeout_s: int
    """Hard lifetime of the sandbox, seconds (Modal kills it then, whatever it is doing)."""
    idle_timeout_s: int
    """Seconds without stdin / exec activity after which Modal ends the sandbox (no leaked bills)."""
    block_network: bool = True
    """No network at all inside the sandbox."""
    tags: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """Tags (run id, backend id, variant) used to find and end sandboxes left behind."""
    disk_mb: int = 256
    """The candidate's disk quota (``Hardware.disk_mb``). The in-sandbox server mounts a tmpfs of
    this size on each candidate's work directory where it may mount (see
    ``harness.sandbox.limits.disk``); modal 1.6's ``Sandbox.create`` takes no disk size (its
    ``_common.py``: "Ephemeral disk requests are not supported on Sandboxes"), so ``/tmp`` and
    ``/dev/shm`` are bounded only by Modal's own sandbox disk there. The Docker-backed test fake
    sizes its tmpfs mounts with it, as the Docker backend does."""
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple, repr=False)
    """Environment of the trusted server (the installation's held-out key; never in a repr or log;
    candidates get an allow-listed environment of their own)."""


class RemoteProcess(Protocol):
    """A running sandbox as the backend sees it: stdin, stdout lines, terminate."""

    @property
    def object_id(self) -> str:
        """Modal's id of the sandbox."""
        ...

    def write(self, data: bytes) -> None:
        """Send bytes to the sandbox's stdin (flushed before returning)."""
        ...

    def lines(self) -> Iterator[str | bytes]:
        """The sandbox's stdout, one line at a time, until it ends."""
        ...

    def poll(self) -> int | None:
        """Exit code once the sandbox has finished, else None."""
        ...

    def stderr_tail(self) -> str:
        """The last of the sandbox's stderr (for infra error messages); may be empty."""
        ...

    def terminate(self) -> None:
        """End the sandbox now; idempotent."""
        ...


class ModalClient(Protocol):
    """The operations the backend needs from Modal."""

    def check_credentials(self) -> None:
        """Raise :class:`ModalInfraError` naming ``modal token new`` when no credentials are set."""
        ...

    def create_sandbox(self, spec: SandboxSpec, image: ImageRecipe) -> RemoteProcess:
        """Build (or reuse) the image and start a sandbox.

        Raises:
            ModalInfraError: If the image build, quota or the service fails.
        """
        ...

    def list_sandboxes(self, tags: dict[str, str]) -> list[RemoteProcess]:
        """Running sandboxes whose tags include all of ``tags``."""
        ...
