"""Start a run's sandbox workers before its plan is complete, so that their warm-up overlaps it.

A local worker spends 2-3 s of CPU starting (an interpreter, the variant's scorer, a zygote that
imports numpy and torch); the run's own process meanwhile imports the agent, the run store and
pandas and checks its options. :func:`start_early` starts the first worker from the bare command line
(a new local run of a CPU variant only: GPU workers depend on the plan's GPU memory split);
:func:`adopt` hands them to the run if the finished plan asks for exactly those workers, and
stops them otherwise. Workers create no run directory or file: options refused by the plan
still leave nothing behind.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.sandbox.names import BackendName, Mode

if TYPE_CHECKING:
    from harness.sandbox.base import Sandbox

    from .run_plan import ReaddPlan, RunPlan


def start_early(
    env: str | None, backend: BackendName, workers: int, mode: Mode, resume: Path | None
) -> Sandbox | None:
    """Start the workers a new local run of ``env`` will most likely use; None where it cannot tell.

    Any problem (an unknown or broken variant, a GPU variant, another backend, a resumed run) gives
    None: the plan reports what is wrong and the run starts its workers itself.
    """
    if env is None or resume is not None or backend != "local":
        return None
    from harness.envs.registry import default_registry

    try:
        v = default_registry().get(env)
    except Exception:  # noqa: BLE001 - the plan reports an unknown or broken variant properly
        return None
    if v.hardware.gpu_count > 0 or v.derived_from is not None:
        return None
    # not run_plan's resolve_workers: importing run_plan (the run store, pandas) is what this overlaps
    from harness.hardware.gpus import gpu_worker_plan
    from harness.sandbox.factory import make_backend

    n, _ = gpu_worker_plan(0, workers, [], remote=False)
    early = make_backend(backend, workers=n, mode=mode, prewarm=(v.id,))
    # One worker: enough for the first result. On two cores a second one warming up at the same
    # time would slow this one and the run's own start; it starts when the agent's work needs it.
    early.start(1)
    return early


def adopt(early: Sandbox | None, plan: RunPlan | ReaddPlan) -> Sandbox | None:
    """``early`` if ``plan`` runs exactly those workers (backend, count, mode, variant), else None.

    Workers not adopted are stopped here.
    """
    from harness.sandbox.local import LocalBackend

    from .run_plan import RunPlan

    if early is None:
        return None
    fits = (
        isinstance(plan, RunPlan)
        and plan.resume is None
        and isinstance(early, LocalBackend)
        and plan.backend == "local"
        and (early.workers, early.mode, early.prewarm) == (plan.workers, plan.mode, (plan.variant.id,))
    )
    if fits:
        return early
    stop(early)
    return None


def stop(backend: Sandbox) -> None:
    """Kill ``backend``'s workers now and release its sandbox uids (no-op once closed).

    A worker still importing torch is not waited for: a refused run exits at once.
    """
    backend.terminate()
    backend.close()  # after terminate: gives the uid block back, waits for nothing
