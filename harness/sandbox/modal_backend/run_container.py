"""A whole run on a Modal container: what the host asks of Modal, as typed interfaces.

``bench run --place modal`` starts one long-lived Modal sandbox (the *run container*, optionally
with a GPU for a learning agent's advisor), runs the ordinary ``bench run`` in it with ``exec``,
and copies its results directory back as a tar stream (``exec tar``) now and then and at the
end. The candidates of that run are still evaluated by the Modal evaluation backend, in sandboxes
of their own (:mod:`.backend`), which never see the run container's secrets.

The placement logic talks to a :class:`RunHost`; :mod:`.run_sdk` is the real one over the
``modal`` package.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from .client import ImageRecipe
from .spec import APP_NAME, MAX_LIFETIME_S, TAG

REMOTE_ROOT = "/evobench"
"""Working directory of the run inside the container (results and leaderboards below it)."""
_GPU_RE = re.compile(r"^[A-Za-z0-9-]+!?(:[1-8])?$")


@dataclass(frozen=True)
class RunContainerSpec:
    """Everything ``modal.Sandbox.create`` is called with for one run container."""

    app_name: str = APP_NAME
    """Modal app the container belongs to (looked up, created if missing)."""
    gpu: str | None = None
    """Modal GPU string ``TYPE[:COUNT]`` (``H100``, ``A100-80GB:2``); None for a CPU container."""
    cpu: float = 4.0
    """CPU cores requested."""
    memory_mb: int = 32768
    """Memory requested, MiB."""
    timeout_s: int = MAX_LIFETIME_S
    """Hard lifetime of the container, seconds (Modal's cap for a sandbox is 24 h)."""
    idle_timeout_s: int = 1800
    """Seconds without host activity (``exec``) after which Modal ends the container: a host that
    died stops paying within this time (the host syncs far more often)."""
    root: str = REMOTE_ROOT
    """Working directory of the run in the container."""
    tags: tuple[tuple[str, str], ...] = field(default_factory=tuple)
    """Tags (run container, run id) that ``bench modal cleanup`` finds it by."""
    secret_env: tuple[tuple[str, str], ...] = field(default_factory=tuple, repr=False)
    """Environment of the run container only (Modal token, held-out key, LLM API keys), passed
    as an ephemeral ``modal.Secret``; never in a repr or log, never passed to candidates."""

    def __post_init__(self) -> None:
        if self.gpu is not None and not _GPU_RE.match(self.gpu):
            raise ValueError(
                f"--gpu {self.gpu!r} is not a Modal GPU string (TYPE[:COUNT], e.g. H100 or A100-80GB:2)"
            )


def run_tags(run_id: str = "") -> tuple[tuple[str, str], ...]:
    """Tags of a run container (``bench modal cleanup`` ends these too)."""
    tags = {TAG: "1", f"{TAG}.placed": "1"}
    if run_id:
        tags[f"{TAG}.run"] = run_id
    return tuple(sorted(tags.items()))


class RunProcess(Protocol):
    """A command running in the run container (``modal.ContainerProcess``)."""

    def lines(self) -> Iterator[str]:
        """Its combined output, one line at a time, until it ends."""
        ...

    def poll(self) -> int | None:
        """Exit code once it has finished, else None."""
        ...


class RunContainer(Protocol):
    """The run container as the placement sees it."""

    @property
    def object_id(self) -> str:
        """Modal's id of the container."""
        ...

    def start(self, argv: tuple[str, ...], workdir: str) -> RunProcess:
        """Start ``argv`` in ``workdir`` (the ordinary ``bench run``).

        Raises:
            ModalInfraError: If the container is gone or Modal fails.
        """
        ...

    def download(self, directory: str) -> bytes:
        """A gzipped tar of ``directory``'s contents (empty bytes when it does not exist yet).

        Raises:
            ModalInfraError: If the container is gone or the copy fails.
        """
        ...

    def upload(self, directory: str, tar_gz: bytes) -> None:
        """Unpack a gzipped tar into ``directory`` (created if missing).

        Raises:
            ModalInfraError: If the container is gone or the unpacking fails.
        """
        ...

    def alive(self) -> bool:
        """Whether the container is still running."""
        ...

    def terminate(self) -> None:
        """End the container now; idempotent, never raises."""
        ...


class RunHost(Protocol):
    """Starts run containers."""

    def check_credentials(self) -> None:
        """Raise :class:`~.client.ModalInfraError` naming ``modal token new`` without credentials."""
        ...

    def create_run_container(self, spec: RunContainerSpec, image: ImageRecipe) -> RunContainer:
        """Build (or reuse) the run image and start a container that waits for ``start``.

        Raises:
            ModalInfraError: If the image build, quota or the service fails.
        """
        ...
