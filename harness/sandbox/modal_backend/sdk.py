"""The real :class:`ModalClient`, over the ``modal`` package (1.x: ``App.lookup``, ``Image``, ``Sandbox``).

Not exercised against Modal's servers in this project's CI (they cannot be reached there): the
backend logic runs against a Docker-backed fake with the same interface, and a ``modal``-marked
live test runs only where credentials are set. See the README's Modal section.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

from .client import ImageRecipe, ModalInfraError, RemoteProcess, SandboxSpec
from .spec import APP_NAME

INSTALL_HINT = "pip install 'evobench[modal]'"
TOKEN_HINT = "run `modal token new` (or set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET)"
STDIN_CHUNK = 1 << 20
"""Bytes written per ``drain`` (modal 1.6 ``io_streams.MAX_BUFFER_SIZE`` is 2 MiB)."""


def _modal() -> Any:
    try:
        import modal
    except ImportError as e:
        raise ModalInfraError(f"the Modal backend needs the modal package: {INSTALL_HINT}") from e
    return modal


def credentials_present() -> bool:
    """Whether Modal credentials are configured (environment or ``~/.modal.toml``); never reveals them."""
    if os.environ.get("MODAL_TOKEN_ID") and os.environ.get("MODAL_TOKEN_SECRET"):
        return True
    try:
        from modal.config import config
    except ImportError:
        return False
    return bool(config.get("token_id")) and bool(config.get("token_secret"))


def split_lines(chunks: Iterable[str | bytes]) -> Iterator[str]:
    """Lines of a Modal output stream, which yields chunks of any size, not lines."""
    buf = ""
    for chunk in chunks:
        buf += chunk.decode("utf-8", errors="replace") if isinstance(chunk, bytes) else chunk
        *done, buf = buf.split("\n")
        yield from done
    if buf:
        yield buf


def resource_kwargs(spec: Any) -> dict[str, Any]:
    """``Sandbox.create``'s resource, lifetime and tag arguments of a sandbox or run container spec."""
    return {
        "tags": dict(spec.tags),
        "gpu": spec.gpu,
        "cpu": spec.cpu,
        "memory": spec.memory_mb,
        "timeout": spec.timeout_s,
        "idle_timeout": spec.idle_timeout_s,
    }


def _explain(e: BaseException) -> str:
    """A one-line reason with the fix for Modal's error types."""
    kind = type(e).__name__
    fixes = {
        "AuthError": TOKEN_HINT,
        "ResourceExhaustedError": "Modal quota or GPU capacity exhausted; retry later or lower --workers",
        "ImageBuildError": "the image build failed on Modal; see its log with `modal app logs evobench`",
        "SandboxTerminatedError": "the sandbox was terminated (lost mid-evaluation)",
        "SandboxTimeoutError": "the sandbox reached its lifetime limit",
        "ConnectionError": "Modal could not be reached; check the network",
    }
    fix = fixes.get(kind, "")
    return f"{kind}: {e}" + (f" ({fix})" if fix else "")


class _SdkProcess:
    """A ``modal.Sandbox`` behind :class:`RemoteProcess`."""

    def __init__(self, sb: Any) -> None:
        self.sb = sb

    @property
    def object_id(self) -> str:
        return str(self.sb.object_id)

    def write(self, data: bytes) -> None:
        # Modal's stdin writer buffers at most 2 MiB between drains (BufferError beyond it).
        view = memoryview(data)
        for start in range(0, max(len(view), 1), STDIN_CHUNK):
            self.sb.stdin.write(view[start : start + STDIN_CHUNK])
            self.sb.stdin.drain()

    def lines(self) -> Iterator[str | bytes]:
        return split_lines(self.sb.stdout)

    def poll(self) -> int | None:
        code = self.sb.poll()
        return None if code is None else int(code)

    def stderr_tail(self) -> str:
        if self.sb.poll() is None:
            return ""  # reading stderr of a live sandbox would block until it ends
        try:
            return str(self.sb.stderr.read())[-4000:]
        except Exception:  # noqa: BLE001 - diagnostics only
            return ""

    def terminate(self) -> None:
        self.sb.terminate()


class SdkModalClient:
    """Modal's servers, through the ``modal`` package."""

    def __init__(self, app_name: str = APP_NAME) -> None:
        """Nothing is contacted until a sandbox is created."""
        self.app_name = app_name
        self._images: dict[str, Any] = {}

    def check_credentials(self) -> None:
        """Raise naming ``modal token new`` when no credentials are configured.

        Raises:
            ModalInfraError: If the package or the credentials are missing.
        """
        _modal()
        if not credentials_present():
            raise ModalInfraError(f"no Modal credentials found: {TOKEN_HINT}")

    def _image(self, recipe: ImageRecipe) -> Any:
        image = self._images.get(recipe.tag)
        if image is None:
            image = _modal().Image.from_dockerfile(
                str(recipe.dockerfile),
                context_dir=str(recipe.context_dir),
                build_args=dict(recipe.build_args),
            )
            self._images[recipe.tag] = image
        return image

    def create_sandbox(self, spec: SandboxSpec, image: ImageRecipe) -> RemoteProcess:
        """Look up the app, build (cached by Modal) the image and start the sandbox.

        Raises:
            ModalInfraError: With the reason and fix for any Modal error.
        """
        modal = _modal()
        try:
            app = modal.App.lookup(spec.app_name, create_if_missing=True)
            sb = modal.Sandbox.create(
                *spec.command,
                app=app,
                image=self._image(image),
                **resource_kwargs(spec),
                block_network=spec.block_network,
                env=dict(spec.env),
            )
        except Exception as e:  # noqa: BLE001 - every Modal failure is an infra error
            raise ModalInfraError(_explain(e)) from e
        return _SdkProcess(sb)

    def list_sandboxes(self, tags: dict[str, str]) -> list[RemoteProcess]:
        """Running sandboxes of the app whose tags include ``tags``.

        Raises:
            ModalInfraError: If Modal cannot be reached.
        """
        modal = _modal()
        try:
            app = modal.App.lookup(self.app_name, create_if_missing=True)
            return [_SdkProcess(sb) for sb in modal.Sandbox.list(app_id=app.app_id, tags=tags)]
        except Exception as e:  # noqa: BLE001
            raise ModalInfraError(_explain(e)) from e
