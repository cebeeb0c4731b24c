"""Trusted evaluation of one candidate: runs in a worker process, owns the scorer and the clock."""

from __future__ import annotations

import atexit
import logging
import math
import os
import signal
import time
import traceback
from dataclasses import dataclass
from typing import Any

from harness.envs.data import DataMissingError, family_data_dir, require_data
from harness.envs.manifest import Language
from harness.envs.refcheck import EnvironmentImportError
from harness.envs.registry import Registry, Variant, default_registry
from harness.evaluation.errors import CandidateInvalid, EvaluationOutcome, InfraError
from harness.evaluation.result import CaseRecord, EvalResult, PhaseDurations, Status, program_sha256
from harness.hardware.cpus import set_worker_index
from harness.scoring.api import Scorer
from harness.scoring.device import bind_worker_slot

from .isolation import UIDS_PER_BACKEND, UNPRIVILEGED_UID_BASE
from .lifetime import remove_own, start_parent_watchdog
from .names import Mode
from .process import Zygote
from .runtime import SandboxedCandidate

log = logging.getLogger(__name__)

_TAIL = 4096


@dataclass(frozen=True)
class EvalJob:
    """One evaluation request, small and picklable (sent to worker processes)."""

    env_id: str
    """Variant id."""
    source: str
    """Candidate program text."""
    mode: Mode = "warm"
    """``warm``: fork from a pre-imported zygote; ``cold``: fresh process per candidate."""
    env_root: str | None = None
    """Environments directory (None: the installed package)."""


class WorkerState:
    """Per-process caches: registry, prepared scorers and warm zygotes."""

    def __init__(self, slot: int) -> None:
        """Create empty caches for worker ``slot`` (which also picks its sandbox uid)."""
        self.slot = slot
        self.uid = UNPRIVILEGED_UID_BASE + slot
        # Scorers compute on this slot's GPU (the one its sandboxes get), not on GPU 0.
        bind_worker_slot(slot)
        _single_threaded_scorer()
        self._registries: dict[str | None, Registry] = {}
        self._scorers: dict[tuple[str, str], Scorer] = {}
        self._zygotes: dict[tuple[object, ...], Zygote] = {}

    def registry(self, root: str | None) -> Registry:
        """The registry for an environments directory (cached)."""
        if root not in self._registries:
            from pathlib import Path

            # lenient like the default one: a broken family fails its own ids, not the root's others
            reg = default_registry() if root is None else Registry(Path(root), strict=False)
            self._registries[root] = reg
        return self._registries[root]

    def scorer(self, variant: Variant) -> Scorer:
        """A prepared scorer for the variant (cached per content hash).

        A subset variant gets its base's prepared scorer re-bound to it (``Scorer.rebind``): the
        data is loaded once per base, and a fresh subset draw costs no preparation and no cache entry.

        Raises:
            DataMissingError: If the variant's data has not been fetched.
        """
        base = variant.base()
        key = (base.id, base.hash)
        if key not in self._scorers:
            data_dir = require_data(base) if base.data else family_data_dir(base.family)
            cls = base.load_attr(base.scorer_ref)
            scorer = cls(base, data_dir)
            scorer.prepare()
            self._scorers[key] = scorer
        prepared = self._scorers[key]
        return prepared if variant is base else prepared.rebind(variant)

    def zygote(self, variant: Variant) -> Zygote:
        """The warm zygote for the variant's hardware spec (started lazily)."""
        key = (variant.hardware, variant.preload)
        if key not in self._zygotes:
            hw = variant.hardware
            self._zygotes[key] = Zygote(hw, self.uid, variant.preload, hw.output_kb * 1024)
        return self._zygotes[key]

    def adopt_zygote(self, variant: Variant, zygote: Zygote) -> None:
        """Use an already started zygote for the variant's hardware spec (before its first use).

        Raises:
            ValueError: If the worker already has a zygote for that spec.
        """
        key = (variant.hardware, variant.preload)
        if key in self._zygotes:
            raise ValueError(f"a zygote for {variant.id}'s hardware already exists")
        self._zygotes[key] = zygote

    def close(self) -> None:
        """Stop every zygote."""
        for z in self._zygotes.values():
            z.stop()
            z.discard_scratch()
        self._zygotes.clear()


def _single_threaded_scorer() -> None:
    """Scorers work on small tensors; intra-op thread pools only contend with the candidate's cores."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a core dependency
        pass


def _tail(b: bytes) -> str:
    return b[-_TAIL:].decode("utf-8", errors="replace")


def evaluate(job: EvalJob, state: WorkerState, backend: str = "local") -> EvalResult:
    """Evaluate one candidate with the variant's trusted scorer; never raises for candidate faults.

    Returns:
        The typed result; any harness failure becomes ``infra_error`` with the reason.

    Raises:
        UnknownIdError: If the env id does not exist (a caller error, checked before submission).
    """
    t_start = time.perf_counter()
    variant = state.registry(job.env_root).get(job.env_id)
    sha = program_sha256(job.source)
    base: dict[str, Any] = {
        "env_id": variant.id,
        "env_version": variant.version,
        "env_hash": variant.hash,
        "program_sha256": sha,
        "backend": backend,
    }
    durations = PhaseDurations()
    cand: SandboxedCandidate | None = None
    outcome_seconds: float | None = None
    cases: list[CaseRecord] = []
    device = ""
    retryable = True
    try:
        scorer = state.scorer(variant)
        device = scorer.device_label()
        deadline = time.monotonic() + variant.timeout_s
        zygote = (
            state.zygote(variant) if (job.mode == "warm" and variant.language is Language.PYTHON) else None
        )
        filename = "candidate.py" if variant.language is Language.PYTHON else "main.cpp"
        cand = SandboxedCandidate(
            scorer.sandbox_source(job.source),
            language=variant.language,
            filename=filename,
            hw=variant.hardware,
            deadline=deadline,
            uid=state.uid,
            zygote=zygote,
            preload=variant.preload if variant.language is Language.PYTHON else (),
            driver=variant.sandbox_driver,
        )
        t_score = time.perf_counter()
        outcome = scorer.score(cand)
        scoring = time.perf_counter() - t_score
        outcome_seconds = outcome.candidate_seconds
        if not math.isfinite(outcome.score) or not all(math.isfinite(v) for v in outcome.metrics.values()):
            raise CandidateInvalid("the score or a metric is not finite")
        status, score, metrics, reason = Status.OK, float(outcome.score), dict(outcome.metrics), ""
        cases = list(outcome.cases)
    except EvaluationOutcome as e:
        scoring = time.perf_counter() - t_start
        status, score, metrics, reason = e.status, None, {}, e.reason
        cases = list(e.cases)
    except (DataMissingError, EnvironmentImportError) as e:  # deterministic: the same on every try
        scoring = 0.0
        status, score, metrics, reason = Status.INFRA_ERROR, None, {}, str(e)
        retryable = False
    except Exception as e:  # noqa: BLE001 - a scorer bug must not be blamed on the candidate
        scoring = time.perf_counter() - t_start
        tb = traceback.format_exc(limit=6)
        status, score, metrics, reason = Status.INFRA_ERROR, None, {}, f"scorer failed: {e!r}\n{tb}"[-_TAIL:]
    finally:
        if cand is not None:
            try:
                cand.close()
            except Exception as e:  # noqa: BLE001
                log.warning("cleanup failed: %s", e)
    if cand is not None:
        durations.setup = cand.setup_seconds
        # Concurrent runs (e.g. test cases in parallel) overlap: never report more candidate time
        # than wall time; a scorer may report its own (wall) figure.
        cand_s = min(cand.candidate_seconds, max(0.0, scoring - cand.setup_seconds))
        if outcome_seconds is not None:
            cand_s = min(cand_s, outcome_seconds) if outcome_seconds > 0 else cand_s
        durations.candidate = cand_s
        durations.score = max(0.0, scoring - cand_s - cand.setup_seconds)
    durations.total = time.perf_counter() - t_start
    return EvalResult(
        status=status,
        score=score,
        metrics=metrics,
        reason=reason,
        stdout_tail=_tail(cand.stdout_tail) if cand else "",
        stderr_tail=_tail(cand.stderr_tail) if cand else "",
        durations=durations,
        cases=cases,
        device=device,
        retryable=retryable,
        **base,
    )


# -- process-pool plumbing -------------------------------------------------------------------
_STATE: WorkerState | None = None


def init_worker(
    slot_queue: object,
    warm_env_ids: tuple[str, ...] = (),
    env_root: str | None = None,
    mode: Mode = "warm",
    parent: int | None = None,
) -> None:
    """Process-pool initializer: claim a slot (uid), tie the worker to its run, pre-start scorers.

    Zygotes are pre-started in ``warm`` mode only (``cold`` never uses them). With ``parent``
    (the run's pid) a watchdog stops this worker's sandboxes and ends it once the run is gone,
    however the run died (``kill -9`` included); a normal exit stops them too.
    """
    global _STATE
    # Ctrl-C and a hang-up (sent to the whole group by a terminal) are the parent's to handle:
    # it stops the run and kills workers deliberately. SIGTERM keeps its default: the process
    # pool itself ends the workers of a broken pool with it, and would wait on one that ignored it.
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    # The pool started this process with them blocked (a signal pending since is discarded by the
    # ignore above); its sandboxes start from an ordinary mask.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, (signal.SIGINT, signal.SIGHUP))
    slot = slot_queue.get() if hasattr(slot_queue, "get") else os.getpid() % 1000
    _STATE = state = WorkerState(int(slot))
    set_worker_index(int(slot) % UIDS_PER_BACKEND)  # its own CPU for CPU-clocked kernel sessions
    atexit.register(_cleanup, state)
    if parent is not None:
        start_parent_watchdog(lambda: _cleanup(state), parent=parent)
    for env_id in warm_env_ids:
        try:
            v = _STATE.registry(env_root).get(env_id)
            _STATE.scorer(v)
            if mode == "warm" and v.language is Language.PYTHON:
                _STATE.zygote(v).start()
        except (InfraError, DataMissingError, EnvironmentImportError, OSError) as e:
            # the evaluation itself reports it (an environment error is not retried)
            log.warning("could not pre-warm %s: %s", env_id, e)


def _cleanup(state: WorkerState) -> None:
    """Stop the worker's zygotes, remove its scratch directories and candidate cgroups."""
    try:
        state.close()
    finally:
        remove_own()


def run_job(job: EvalJob, backend: str = "local") -> EvalResult:
    """Pool entry point: evaluate with this process's state."""
    global _STATE
    if _STATE is None:
        _STATE = WorkerState(os.getpid() % 1000)
    return evaluate(job, _STATE, backend)
