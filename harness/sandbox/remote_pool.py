"""A pool of remote evaluation sessions (one per worker slot, or one per evaluation).

The shared shape of backends whose trusted server runs somewhere else (a Modal sandbox; the same
server the Docker backend starts): ``workers`` slots, a warm session per (slot, variant) or a
fresh session per evaluation, infra errors retried with backoff and kept apart from candidate
results, and every session ended on close, on errors and on Ctrl-C.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from abc import abstractmethod
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Protocol

from harness.envs.registry import Variant
from harness.evaluation.result import EvalResult, Status, program_sha256
from harness.inside import wire

from .base import Sandbox
from .worker import Mode

log = logging.getLogger(__name__)
GRACE_S = 15.0
"""Host-side allowance beyond the variant's timeout before a session is declared hung."""


class RemoteInfraError(RuntimeError):
    """The remote side failed (never the candidate's fault); the message names the fix if known."""


class Session(Protocol):
    """One running trusted server."""

    def evaluate(self, source: str, timeout_s: float, env_id: str = "") -> EvalResult:
        """Evaluate one program under ``env_id`` (default: the session's own variant).

        ``env_id`` may name any subset variant of the session's base variant (same image,
        hardware and data), so one warm session serves every subset of its base.

        Raises:
            TimeoutError: If no reply came within ``timeout_s``.
            RemoteInfraError: If the session failed.
        """
        ...

    def close(self) -> None:
        """End the session; idempotent."""
        ...


class RemotePoolBackend(Sandbox):
    """Slots, warm / cold sessions, retries and clean-up; subclasses say how to start a session."""

    name = "remote"
    infra_errors: tuple[type[BaseException], ...] = (RemoteInfraError, OSError, EOFError, wire.WireError)
    """Exception types that mean "the harness failed" (retried, never blamed on the candidate)."""

    def __init__(self, workers: int | None = None, mode: Mode = "warm", *, infra_retries: int = 2) -> None:
        """Sessions start lazily, on first use of a slot.

        Args:
            workers: Parallel sessions (default: number of cores).
            mode: ``warm`` (long-lived session per slot and variant) or ``cold`` (one per evaluation).
            infra_retries: Extra attempts after an infra error (backoff 0.5 s, 1 s, ...).
        """
        self.workers = workers or os.cpu_count() or 1
        self.mode: Mode = mode
        self.infra_retries = infra_retries
        self.id = uuid.uuid4().hex[:12]
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"{self.name}-eval")
        self._slots: queue.Queue[int] = queue.Queue()
        for i in range(self.workers):
            self._slots.put(i)
        self._warm: dict[tuple[int, str], Session] = {}
        self._live: set[Session] = set()
        self._lock = threading.Lock()
        self._closed = False

    @abstractmethod
    def _start(self, variant: Variant, slot: int) -> Session:
        """Start a session for ``variant`` in ``slot`` (raise an ``infra_errors`` type on failure)."""

    def _janitor(self) -> None:  # noqa: B027 - optional hook
        """End anything of this backend's that outlived its session objects (default: nothing)."""

    def submit(self, variant: Variant, source: str) -> Future[EvalResult]:
        """Queue one evaluation; the future resolves to an ``EvalResult`` (never raises).

        Raises:
            RuntimeError: If the backend is closed.
        """
        if self._closed:
            raise RuntimeError("backend is closed")
        return self._pool.submit(self._run, variant, source)

    def _result(
        self, variant: Variant, source: str, status: Status, reason: str, attempts: int
    ) -> EvalResult:
        return EvalResult(
            status=status,
            reason=reason,
            env_id=variant.id,
            env_version=variant.version,
            env_hash=variant.hash,
            program_sha256=program_sha256(source),
            backend=self.name,
            attempts=attempts,
        )

    def _run(self, variant: Variant, source: str) -> EvalResult:
        last = ""
        for attempt in range(1, self.infra_retries + 2):
            if self._closed:
                break
            slot = self._slots.get()
            try:
                res = self._once(variant, source, slot)
                if res.status is not Status.INFRA_ERROR or not res.retryable:
                    return res.model_copy(update={"attempts": attempt, "backend": self.name})
                last = res.reason
            except self.infra_errors as e:
                last = f"{type(e).__name__}: {e}"
            finally:
                self._slots.put(slot)
            first = last.splitlines()[0][:200] if last else ""
            log.warning("%s infra error (attempt %d): %s", self.name, attempt, first)
            time.sleep(0.5 * 2 ** (attempt - 1))
        attempts = self.infra_retries + 1
        return self._result(variant, source, Status.INFRA_ERROR, last or "backend closed", attempts)

    def _once(self, variant: Variant, source: str, slot: int) -> EvalResult:
        warm = self.mode == "warm"
        # Keyed by base id: subset variants (a fresh one per validation draw) reuse the base's
        # warm session instead of starting, and keeping, one session each.
        key = (slot, variant.base_id)
        s = self._warm.get(key) if warm else None
        if s is None:
            s = self._start(variant.base(), slot)
            with self._lock:
                self._live.add(s)
                if warm:
                    self._warm[key] = s
        limit = variant.timeout_s + GRACE_S
        try:
            return s.evaluate(source, limit, variant.id)
        except TimeoutError:
            # The server enforces the candidate's limit itself; silence past it means the session
            # is stuck on the candidate's account, so this stays a candidate timeout.
            self._discard(key, s)
            return self._result(
                variant, source, Status.TIMEOUT, f"no result within {limit:.0f} s; session ended", 1
            )
        except BaseException:
            self._discard(key, s)
            raise
        finally:
            if not warm:
                self._discard(key, s)

    def _discard(self, key: tuple[int, str], s: Session) -> None:
        with self._lock:
            self._live.discard(s)
            if self._warm.get(key) is s:
                del self._warm[key]
        s.close()

    def close(self) -> None:
        """Finish queued jobs, then end every session."""
        self._pool.shutdown(wait=True)
        self._end_all()

    def terminate(self) -> None:
        """Drop queued jobs and end every session now."""
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._end_all()

    def _end_all(self) -> None:
        self._closed = True
        with self._lock:
            live, self._live = list(self._live), set()
            self._warm.clear()
        for s in live:
            s.close()
        try:
            self._janitor()
        except Exception as e:  # noqa: BLE001 - best effort after the sessions themselves are gone
            log.debug("%s janitor: %s", self.name, e)
