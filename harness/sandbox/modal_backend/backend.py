"""Modal backend: the trusted server runs in a ``modal.Sandbox`` with the variant's GPUs.

Each sandbox runs ``harness.sandbox.container_main --stdio`` from the variant's image (built from
the same Dockerfiles as the Docker backend). The host writes protocol lines to the sandbox's
stdin and reads replies from its stdout: no inbound network is needed, and the sandbox itself
has none (``block_network``). ``warm``: one sandbox per worker slot and variant, whose server
forks fresh candidates from a clean zygote; ``cold``: a sandbox per evaluation. Sandboxes carry
tags (backend id, run id, variant) and are terminated on close, on errors and on Ctrl-C;
``bench modal cleanup`` ends any left behind.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from harness.envs.registry import Variant
from harness.evaluation.result import EvalResult
from harness.inside import wire

from .. import stdio_wire
from ..remote_pool import RemoteInfraError, RemotePoolBackend
from ..worker import Mode
from .client import ImageRecipe, ModalClient, ModalInfraError, RemoteProcess
from .spec import TAG, image_tag, sandbox_spec

log = logging.getLogger(__name__)
START_TIMEOUT_S = 900.0
"""Image pull, GPU scheduling, imports and the zygote start of a new sandbox."""
_EOF = object()


class _SandboxSession:
    """One Modal sandbox and the reader thread that turns its stdout into messages."""

    def __init__(self, proc: RemoteProcess, variant: Variant) -> None:
        self.proc = proc
        self.variant = variant
        self._inbox: queue.Queue[Any] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name=f"modal-{proc.object_id}", daemon=True)
        self._reader.start()
        try:
            first = self._next(START_TIMEOUT_S)
        except TimeoutError as e:
            self.close()
            raise ModalInfraError(
                f"sandbox {proc.object_id} was not ready within {START_TIMEOUT_S:.0f} s"
            ) from e
        except BaseException:
            self.close()
            raise
        if first != {"type": "ready"}:
            self.close()
            raise ModalInfraError(f"sandbox {proc.object_id} sent {str(first)[:200]} instead of ready")

    def _read(self) -> None:
        try:
            for line in self.proc.lines():
                if not stdio_wire.is_protocol_line(line):
                    continue
                try:
                    self._inbox.put(stdio_wire.decode_line(line))
                except wire.WireError as e:
                    self._inbox.put(e)
        except Exception as e:  # noqa: BLE001 - any client failure means the stream is lost
            self._inbox.put(ModalInfraError(f"lost the sandbox's output stream: {type(e).__name__}: {e}"))
        self._inbox.put(_EOF)

    def _next(self, timeout: float) -> Any:
        try:
            item = self._inbox.get(timeout=timeout)
        except queue.Empty as e:
            raise TimeoutError(f"nothing from sandbox {self.proc.object_id} within {timeout:.0f} s") from e
        if item is _EOF:
            self._inbox.put(_EOF)  # later readers see the end too
            code = self.proc.poll()
            tail = self.proc.stderr_tail().strip()[-2000:]
            raise ModalInfraError(
                f"sandbox {self.proc.object_id} ended (exit {code})" + (f":\n{tail}" if tail else "")
            )
        if isinstance(item, BaseException):
            raise item
        return item

    def evaluate(self, source: str, timeout_s: float, env_id: str = "") -> EvalResult:
        """Send one job and wait for its result (``env_id``: default the sandbox's variant).

        Raises:
            TimeoutError: If no reply came in time.
            ModalInfraError: If the sandbox or its streams failed.
        """
        job = {"op": "evaluate", "env_id": env_id or self.variant.id, "source": source, "mode": "warm"}
        try:
            self.proc.write(stdio_wire.encode_line(job))
        except (OSError, ValueError, BufferError) as e:
            raise ModalInfraError(f"could not write to sandbox {self.proc.object_id}: {e}") from e
        reply = self._next(timeout_s)
        if not isinstance(reply, dict) or reply.get("type") != "result":
            raise ModalInfraError(f"unexpected reply from the sandbox: {str(reply)[:200]}")
        return EvalResult.model_validate_json(reply["result"])

    def close(self) -> None:
        """Terminate the sandbox; idempotent."""
        try:
            self.proc.terminate()
        except Exception as e:  # noqa: BLE001 - already gone or service down: nothing else to do
            log.debug("sandbox termination: %s", e)


class ModalBackend(RemotePoolBackend):
    """Evaluate in Modal sandboxes (same conformance suite as the local and Docker backends)."""

    name = "modal"
    infra_errors = (*RemotePoolBackend.infra_errors, ModalInfraError)

    def __init__(
        self,
        workers: int | None = None,
        mode: Mode = "warm",
        *,
        client: ModalClient | None = None,
        run_id: str = "",
        infra_retries: int = 2,
        idle_timeout_s: int = 300,
        prewarm: tuple[str, ...] = (),
    ) -> None:
        """Check credentials now; sandboxes start on first use.

        Args:
            workers: Parallel sandboxes (default: number of local cores).
            mode: ``warm`` (sandbox per worker slot) or ``cold`` (sandbox per evaluation).
            client: The Modal client (default: the real one over the ``modal`` package).
            run_id: Tag sandboxes with this run id (``bench modal cleanup --run-id``).
            infra_retries: Extra attempts after an infra error, with backoff.
            idle_timeout_s: How long an idle warm sandbox lives without the host.
            prewarm: Accepted for interface parity; every sandbox pre-starts its variant.

        Raises:
            ModalInfraError: If no Modal credentials are configured.
        """
        if client is None:
            from .sdk import SdkModalClient

            client = SdkModalClient()
        client.check_credentials()
        super().__init__(workers, mode, infra_retries=infra_retries)
        self.client: ModalClient = client
        self.run_id = run_id
        self.idle_timeout_s = idle_timeout_s
        self._recipes: dict[str, ImageRecipe] = {}
        self._recipe_lock = threading.Lock()

    def _recipe(self, variant: Variant) -> ImageRecipe:
        from harness.images.combined import stage_combined

        with self._recipe_lock:
            # Subset variants run in their base's image: one recipe per base id.
            r = self._recipes.get(variant.base_id)
            if r is None:
                ctx, dockerfile, args = stage_combined(variant)
                r = ImageRecipe(
                    variant.base_id, image_tag(variant), dockerfile, ctx, tuple(sorted(args.items()))
                )
                self._recipes[variant.base_id] = r
            return r

    def _start(self, variant: Variant, slot: int) -> _SandboxSession:
        spec = sandbox_spec(
            variant,
            slot=slot,
            backend_id=self.id,
            run_id=self.run_id,
            warm=self.mode == "warm",
            idle_timeout_s=self.idle_timeout_s,
        )
        try:
            proc = self.client.create_sandbox(spec, self._recipe(variant))
        except ModalInfraError:
            raise
        except Exception as e:  # noqa: BLE001 - the client's own errors are infra by definition
            raise ModalInfraError(f"could not start a Modal sandbox: {type(e).__name__}: {e}") from e
        return _SandboxSession(proc, variant)

    def sandboxes(self) -> list[RemoteProcess]:
        """Running sandboxes of this backend (for tests and janitors)."""
        return self.client.list_sandboxes({f"{TAG}.backend": self.id})

    def _janitor(self) -> None:
        for leftover in self.sandboxes():
            leftover.terminate()
        from harness.images.combined import remove_context

        for r in self._recipes.values():
            remove_context(r.context_dir)
        self._recipes.clear()


__all__ = ["ModalBackend", "ModalInfraError", "RemoteInfraError"]
