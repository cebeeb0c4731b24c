"""The real :class:`~.run_container.RunHost`, over the ``modal`` package (1.x).

Calls, checked against modal 1.6.4's own signatures (``tests/harness/sandbox/modal_sdk_fake.py``
binds every call to them): ``App.lookup(name, create_if_missing=)``,
``Image.from_dockerfile(path, context_dir=, build_args=)``, ``Secret.from_dict(env_dict)``,
``Sandbox.create(*cmd, app=, image=, secrets=, tags=, gpu=, cpu=, memory=, timeout=,
idle_timeout=, workdir=)``, ``Sandbox.exec(*args, workdir=, text=, stderr=)``,
``ContainerProcess.stdout`` / ``stdin.write`` / ``stdin.write_eof`` / ``stdin.drain`` / ``wait`` /
``poll``, ``Sandbox.poll`` and ``Sandbox.terminate``. Not exercised against Modal's servers here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from .client import ImageRecipe, ModalInfraError
from .run_container import RunContainer, RunContainerSpec, RunProcess
from .sdk import STDIN_CHUNK, _explain, _modal, credentials_present, resource_kwargs, split_lines
from .sdk import TOKEN_HINT as _TOKEN_HINT

_MERGED = ("sh", "-c", 'exec "$@" 2>&1', "sh")
"""Prefix that runs a command with its stderr joined to its stdout (one ordered stream)."""


class _SdkRunProcess:
    """A ``modal.ContainerProcess`` behind :class:`RunProcess`."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc

    def lines(self) -> Iterator[str]:
        return split_lines(self.proc.stdout)

    def poll(self) -> int | None:
        try:
            code = self.proc.poll()
        except Exception as e:  # noqa: BLE001 - cannot ask the process: the container is lost
            raise ModalInfraError(_explain(e)) from e
        return None if code is None else int(code)


class _SdkRunContainer:
    """A ``modal.Sandbox`` that hosts one run."""

    def __init__(self, sb: Any, modal: Any) -> None:
        self.sb = sb
        self._modal = modal

    @property
    def object_id(self) -> str:
        return str(self.sb.object_id)

    def _exec(self, *argv: str, text: bool, workdir: str | None = None) -> Any:
        try:
            return self.sb.exec(
                *_MERGED, *argv, workdir=workdir, text=text, stderr=self._modal.stream_type.StreamType.DEVNULL
            )
        except Exception as e:  # noqa: BLE001 - every Modal failure is an infra error
            raise ModalInfraError(_explain(e)) from e

    def start(self, argv: tuple[str, ...], workdir: str) -> RunProcess:
        return _SdkRunProcess(self._exec(*argv, text=True, workdir=workdir))

    def download(self, directory: str) -> bytes:
        # The directory may not exist before the run created it: an empty answer, not an error.
        script = 'if [ -d "$1" ]; then tar -czf - -C "$1" .; fi'
        proc = self._exec("sh", "-c", script, "sh", directory, text=False)
        return bytes(self._finish(proc, lambda: proc.stdout.read(), f"copying {directory} out"))

    def upload(self, directory: str, tar_gz: bytes) -> None:
        proc = self._exec("sh", "-c", 'mkdir -p "$1" && tar -xzf - -C "$1"', "sh", directory, text=False)

        def send() -> bytes:
            # Modal's stdin writer buffers at most 2 MiB between drains.
            view = memoryview(tar_gz)
            for start in range(0, len(view), STDIN_CHUNK):
                proc.stdin.write(view[start : start + STDIN_CHUNK])
                proc.stdin.drain()
            proc.stdin.write_eof()
            proc.stdin.drain()
            return b""

        self._finish(proc, send, f"copying into {directory}")

    def _finish(self, proc: Any, io: Callable[[], bytes], what: str) -> bytes:
        """Do a command's stdin / stdout part, wait for it and check its exit code."""
        try:
            data = io()
            code = proc.wait()
        except Exception as e:  # noqa: BLE001 - every Modal failure is an infra error
            raise ModalInfraError(_explain(e)) from e
        if code != 0:
            raise ModalInfraError(f"{what} of container {self.object_id} failed (exit {code})")
        return data

    def alive(self) -> bool:
        try:
            return self.sb.poll() is None
        except Exception:  # noqa: BLE001 - cannot even ask: treat as lost
            return False

    def terminate(self) -> None:
        try:
            self.sb.terminate()
        except Exception:  # noqa: BLE001 - already gone or service down: nothing else to do
            pass


class SdkRunHost:
    """Modal's servers, through the ``modal`` package (``modal``: a stand-in module for tests)."""

    def __init__(self, modal: Any = None) -> None:
        """Nothing is contacted until a container is created."""
        self._modal_module = modal

    def _m(self) -> Any:
        return self._modal_module if self._modal_module is not None else _modal()

    def check_credentials(self) -> None:
        """Raise naming ``modal token new`` when no credentials are configured.

        Raises:
            ModalInfraError: If the package or the credentials are missing.
        """
        self._m()
        if self._modal_module is None and not credentials_present():
            raise ModalInfraError(f"no Modal credentials found: {_TOKEN_HINT}")

    def create_run_container(self, spec: RunContainerSpec, image: ImageRecipe) -> RunContainer:
        """Look up the app, build (cached by Modal) the run image and start the container.

        Raises:
            ModalInfraError: With the reason and fix for any Modal error.
        """
        modal = self._m()
        try:
            app = modal.App.lookup(spec.app_name, create_if_missing=True)
            img = modal.Image.from_dockerfile(
                str(image.dockerfile), context_dir=str(image.context_dir), build_args=dict(image.build_args)
            )
            secrets = [modal.Secret.from_dict(dict(spec.secret_env))] if spec.secret_env else []
            # The container only waits; the run itself is started with exec, so the host can
            # copy its results out while it runs and after it ended.
            sb = modal.Sandbox.create(
                "sleep",
                str(spec.timeout_s),
                app=app,
                image=img,
                secrets=secrets,
                **resource_kwargs(spec),
                workdir=spec.root,
            )
        except Exception as e:  # noqa: BLE001 - every Modal failure is an infra error
            raise ModalInfraError(_explain(e)) from e
        return _SdkRunContainer(sb, modal)
