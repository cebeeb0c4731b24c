"""The embedded default backend: trusted scorers in worker processes, candidates in local sandboxes."""

from __future__ import annotations

import itertools
import logging
import multiprocessing as mp
import os
import signal
import threading
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from harness.envs.registry import Variant
from harness.evaluation.result import EvalResult, Status, program_sha256

from .base import Sandbox
from .isolation import UIDS_PER_BACKEND, detect_isolation
from .lifetime import sweep_leftovers
from .uid_blocks import UidBlock
from .worker import EvalJob, Mode, init_worker, run_job

log = logging.getLogger(__name__)

_instances = itertools.count()

PARENT_SIGNALS = frozenset({signal.SIGINT, signal.SIGHUP})
"""Signals a terminal sends to the whole process group that the run's own process handles."""


class _QuietWorker(mp.context.SpawnProcess):
    """A pool worker that starts with Ctrl-C and hang-up blocked.

    A spawned worker imports the harness (seconds on a loaded machine) before its initializer can
    ignore these signals; a Ctrl-C in that window printed a ~40-line ``KeyboardInterrupt``
    traceback from inside an import. A blocked mask is inherited through fork and exec (the
    resource tracker is started the same way), so the signal waits until
    :func:`~harness.sandbox.worker.init_worker` ignores it, which discards it.
    """

    def start(self) -> None:
        """Start the process with :data:`PARENT_SIGNALS` blocked in it (this thread's mask is restored)."""
        old = signal.pthread_sigmask(signal.SIG_BLOCK, PARENT_SIGNALS)
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


class _QuietSpawnContext(mp.context.SpawnContext):
    """The ``spawn`` context whose processes are :class:`_QuietWorker`."""

    Process = _QuietWorker


def _uid_hint() -> int:
    """Where a new backend starts looking for a free uid block (spread over processes)."""
    return os.getpid() * 31 + next(_instances)


class LocalBackend(Sandbox):
    """Evaluate on this machine with ``workers`` trusted worker processes.

    Each worker process hosts the trusted scorers and, in ``warm`` mode, a zygote sandbox that has
    imported numpy and torch and forks one fresh unprivileged child per candidate. In ``cold`` mode
    every candidate gets a brand-new sandboxed interpreter. Infra failures (a worker process
    dying) are retried with backoff; candidate failures and deterministic environment errors
    (``EvalResult.retryable`` False) never are.
    """

    name = "local"

    def __init__(
        self,
        workers: int | None = None,
        mode: Mode = "warm",
        *,
        infra_retries: int = 2,
        env_root: str | None = None,
        prewarm: tuple[str, ...] = (),
    ) -> None:
        """Create the backend (worker processes start on first use).

        Args:
            workers: Parallel evaluations (default: number of cores).
            mode: ``warm`` (zygote fork per candidate) or ``cold`` (fresh interpreter per candidate).
            infra_retries: Extra attempts after an infra error.
            env_root: Environments directory (None: installed package).
            prewarm: Variant ids whose scorers and zygotes each worker starts at once.
        """
        self.workers = workers or os.cpu_count() or 1
        self.mode: Mode = mode
        self.infra_retries = infra_retries
        self.env_root = env_root
        self.prewarm = prewarm
        self.isolation = detect_isolation()
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._uids: UidBlock | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._closed:
                raise RuntimeError("backend is closed")
            if self._pool is None:
                # What killed runs left (their workers now end with them): directories,
                # semaphores, cgroups of owners that are gone; never a live run's.
                sweep_leftovers()
                ctx = _QuietSpawnContext()
                slots = ctx.Queue()
                # Sandbox uids private to this backend instance: another run's fork bomb (per-uid
                # process limit) or leftover cannot touch this one's candidates.
                if self._uids is None:
                    self._uids = UidBlock.lease(_uid_hint())
                for i in range(self.workers):
                    slots.put(self._uids.offset + i % UIDS_PER_BACKEND)
                self._pool = ProcessPoolExecutor(
                    self.workers,
                    mp_context=ctx,
                    initializer=init_worker,
                    initargs=(slots, self.prewarm, self.env_root, self.mode, os.getpid()),
                )
            return self._pool

    def start(self, workers: int | None = None) -> None:
        """Spawn worker processes now (``workers`` of them, None: all); each pre-warms ``prewarm``.

        Pre-warming is the variant's scorer and zygote (numpy, torch: 2-3 s of CPU). Returns at
        once. A pool spawns a process only for a job no idle worker can take, so one trivial job
        per worker makes it spawn them; real jobs queue behind them.

        Raises:
            RuntimeError: If the backend has been closed.
        """
        pool = self._get_pool()
        for _ in range(min(self.workers, self.workers if workers is None else workers)):
            pool.submit(os.getpid)

    def _reset_pool(self, broken: ProcessPoolExecutor) -> None:
        with self._lock:
            if self._pool is broken:
                broken.shutdown(wait=False, cancel_futures=True)
                self._pool = None

    def submit(self, variant: Variant, source: str) -> Future[EvalResult]:
        """Queue one evaluation; the future resolves to an ``EvalResult`` (never raises).

        Raises:
            RuntimeError: If the backend has been closed.
        """
        if self._closed:
            raise RuntimeError("backend is closed")
        job = EvalJob(variant.id, source, self.mode, self.env_root)
        out: Future[EvalResult] = Future()
        self._attempt(job, variant, out, attempt=1)
        return out

    def _attempt(self, job: EvalJob, variant: Variant, out: Future[EvalResult], attempt: int) -> None:
        try:
            pool = self._get_pool()
            fut = pool.submit(run_job, job, self.name)
        except (RuntimeError, BrokenProcessPool) as e:
            out.set_result(self._infra(variant, job, f"could not submit: {e}", attempt))
            return

        def done(f: Future[EvalResult]) -> None:
            try:
                res = f.result()
                error = ""
            except BrokenProcessPool as e:
                self._reset_pool(pool)
                res, error = None, f"worker process died: {e}"
            except Exception as e:  # noqa: BLE001 - anything else from the pool is infra
                res, error = None, f"worker failed: {e!r}"
            if res is not None and (res.status is not Status.INFRA_ERROR or not res.retryable):
                out.set_result(res.model_copy(update={"attempts": attempt}))
                return
            reason = res.reason if res is not None else error
            if attempt <= self.infra_retries and not self._closed:
                log.warning("infra error on attempt %d, retrying: %s", attempt, reason.splitlines()[0][:200])
                delay = 0.5 * 2 ** (attempt - 1)
                timer = threading.Timer(delay, self._attempt, args=(job, variant, out, attempt + 1))
                timer.daemon = True  # never keeps an interrupted process alive
                timer.start()
                return
            out.set_result(
                res.model_copy(update={"attempts": attempt})
                if res is not None
                else self._infra(variant, job, reason, attempt)
            )

        fut.add_done_callback(done)

    def _infra(self, variant: Variant, job: EvalJob, reason: str, attempts: int) -> EvalResult:
        return EvalResult(
            status=Status.INFRA_ERROR,
            reason=reason,
            env_id=variant.id,
            env_version=variant.version,
            env_hash=variant.hash,
            program_sha256=program_sha256(job.source),
            backend=self.name,
            attempts=attempts,
        )

    def terminate(self) -> None:
        """Kill the worker processes now (their sandboxes die with them) and cancel queued jobs."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            procs = list(getattr(pool, "_processes", {}).values())
            for proc in procs:
                proc.kill()
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.join(timeout=5)
            sweep_leftovers()  # the killed workers could not remove their candidates' groups or dirs

    def close(self) -> None:
        """Shut the worker pool down; workers kill their sandboxes as they exit."""
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
            sweep_leftovers()  # what a worker that died mid-evaluation left
        if self._uids is not None:
            self._uids.release()  # its candidates are dead: the workers killed them as they exited
            self._uids = None
