"""``bench run``'s plan: what a run will be, resolved and checked before anything starts.

:func:`plan_run` turns the command line into a :class:`RunPlan` (a new run or the resumption of
one) or a :class:`ReaddPlan` (``--resume`` of a finished run). It looks up the variant and the
agent, applies the configuration overrides, reads a resumed run's frozen settings (without
locking it), and checks what can be checked on this host without a sandbox: data present, the
variant's GPU usable, the agent's preflight, the backend's credentials. It creates no run
directory and starts no sandbox, backend or agent; :func:`evobench.cli.commands_run.run`
executes the plan.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from harness.budget import Budget
from harness.envs.data import DataMissingError, require_data
from harness.envs.registry import Variant, default_registry
from harness.results.records import RunInfo
from harness.results.store import RunStore, RunStoreError
from harness.runner.context import Agent
from harness.sandbox.factory import BackendName, BackendUnavailable, check_backend
from harness.sandbox.worker import Mode

from .failures import user_error

EXIT_USAGE = 2


class PlanError(Exception):
    """The command line does not describe a run that can start here; the message is for the user."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        """Keep the user-facing message and the exit code ``bench run`` returns for it."""
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class RunArgs:
    """``bench run``'s options as given (see :func:`evobench.cli.commands_run.run`)."""

    agent: str | None = None
    env: str | None = None
    seed: int = 0
    backend: BackendName = "local"
    workers: int = 0
    max_evaluations: int = 50
    max_wall_s: float | None = None
    max_cost_usd: float | None = None
    agent_config: str = "{}"
    model: str | None = None
    advisor_model: str | None = None
    implementer_model: str | None = None
    mode: Mode = "warm"
    results_dir: Path = Path("results")
    leaderboard_dir: Path = Path("leaderboards")
    resume: Path | None = None
    label: str | None = None


@dataclass(frozen=True)
class RunPlan:
    """A run to start (``resume`` None) or to continue, every choice resolved."""

    variant: Variant
    """The full variant the run evaluates on."""
    agent: Agent
    """The configured agent (not started)."""
    budget: Budget
    """The run's limits (a resumed run's frozen ones)."""
    backend: BackendName
    """Where candidates are evaluated."""
    workers: int
    """Parallel evaluations (resolved: never 0)."""
    mode: Mode
    """``warm`` or ``cold`` sandboxes."""
    seed: int
    """Master seed of a new run (a resumed run keeps its own)."""
    results_dir: Path
    """Where a new run's directory is created."""
    leaderboard_dir: Path
    """Where the finished run's leaderboard row goes."""
    resume: Path | None = None
    """The run directory to continue (None: a new run)."""
    warnings: tuple[str, ...] = ()
    """Things the user should know that do not stop the run (e.g. workers sharing a GPU)."""
    gpu_env: tuple[tuple[str, str], ...] = ()
    """Variables of the run's GPU memory plan, set before the workers start (see :func:`gpu_memory_plan`)."""
    gpu_lines: tuple[str, ...] = ()
    """The GPU memory plan's decisions, printed when the run starts."""
    label: str | None = None
    """The user's name for the run's identity (``--label``; a resumed run keeps its recorded one)."""


@dataclass(frozen=True)
class ReaddPlan:
    """``--resume`` of a finished run: nothing to evaluate, only its leaderboard row to check."""

    run_dir: Path
    """The finished run."""
    variant: Variant
    """Its variant."""


def data_problem(v: Variant) -> str | None:
    """Why the variant's data is not usable here (None: it is, or it needs none)."""
    if not v.data:
        return None
    try:
        require_data(v)
    except DataMissingError as e:
        return str(e)
    return None


def gpu_problem(v: Variant, backend: str) -> str | None:
    """Why a local run cannot use the variant's GPU here (None: it can, or it needs none)."""
    if backend != "local" or not v.hardware.gpu:
        return None
    from harness.evaluation.errors import InfraError
    from harness.scoring.device import choose_device

    try:
        choose_device(v.hardware.gpu)
    except InfraError as e:
        return f"{v.id}: {e}"
    return None


def gpu_memory_plan(
    v: Variant, agent: Agent, backend: str, requested: int
) -> tuple[dict[str, str], list[str]]:
    """Plan GPU memory between a learning agent's policy and its evaluations (``agents/learning/gpu_plan``).

    Agents without a policy on the GPU (every other agent, or a learner on the CPU) get no plan.
    Evaluations share this machine's GPUs only on the local and Docker backends.

    Returns:
        The variables to set before the workers start, and the plan's lines for the user.

    Raises:
        PlanError: If the policy and the evaluations cannot fit (the message has the numbers).
    """
    plan_fn = getattr(agent, "plan_gpu_memory", None)
    if plan_fn is None:
        return {}, []
    from harness.hardware.gpus import gpu_memory_totals, host_gpus

    totals = gpu_memory_totals()
    gpus = {g: totals[g] for g in host_gpus() if g in totals}
    local_evals = v.hardware.gpu_count > 0 and backend != "modal"
    slots = (requested or 1) if local_evals else 0
    need = v.hardware.gpu_memory_gib
    try:
        plan = plan_fn(gpus, None if need is None else int(need * 1024**3), slots)
    except ValueError as e:  # GpuPlanError is a ValueError
        raise PlanError(f"GPU memory plan: {e}") from e
    return ({}, []) if plan is None else (plan.env(), list(plan.lines))


def resolve_workers(
    v: Variant, backend: str, requested: int, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """``--workers`` or its default (one per core, or one per GPU block), and a warning ("" if none).

    ``env``: the GPU memory plan's variables, over this process's (GPUs kept by the agent, which
    the workers will not use, are not counted).
    """
    import os

    from harness.hardware.gpus import evaluation_pool, gpu_worker_plan, host_gpus

    pool = evaluation_pool(host_gpus(), {**os.environ, **(env or {})}) if v.hardware.gpu_count > 0 else []
    n, warning = gpu_worker_plan(v.hardware.gpu_count, requested, pool, remote=backend == "modal")
    return n, (f"{v.id}: {warning}" if warning else "")


def _configured_agent(a: RunArgs) -> Agent:
    from agents.registry import get_agent_class

    assert a.agent is not None
    cls = get_agent_class(a.agent)
    try:
        overrides = json.loads(a.agent_config)
        if a.model is not None:
            if "model" not in cls.Config.model_fields:
                raise PlanError(f"agent {cls.name!r} does not use an LLM (--model)")
            overrides["model"] = a.model
        for key, value in (("advisor_model", a.advisor_model), ("implementer_model", a.implementer_model)):
            if value is None:
                continue
            if key not in cls.Config.model_fields:
                raise PlanError(f"agent {cls.name!r} has no {key.replace('_', '-')}")
            overrides[key] = value
        return cls(cls.Config.model_validate(overrides))
    except ValueError as e:
        raise PlanError(f"bad --agent-config: {e}") from e


_DEFAULTS = RunArgs()
_BUDGET_FLAGS = {
    "--max-evaluations": "max_evaluations",
    "--max-wall-s": "max_wall_s",
    "--max-cost-usd": "max_cost_usd",
}
_MODEL_FLAGS = {
    "--model": "model",
    "--advisor-model": "advisor_model",
    "--implementer-model": "implementer_model",
}


def _differs(given: object, default: object, recorded: object) -> bool:
    """A flag conflicts when it was set (not its default) to something other than the run's value."""
    return given != default and given != recorded


def _same_dir(a: Path, b: str | Path) -> bool:
    return a.expanduser().resolve() == Path(b).expanduser().resolve()


def resume_conflicts(a: RunArgs, info: RunInfo, run_dir: Path) -> tuple[list[str], list[str]]:
    """The flags given with ``--resume`` that the run's record contradicts: (refused, ignored).

    A resumed run continues as recorded. Flags that define what it measures or how it is named
    (variant, agent and its configuration, models, seed, budget, backend, workers, leaderboard,
    label) are refused when
    they differ; ``--mode`` (speed, never scores) and ``--results-dir`` (the run stays in its
    directory) are ignored with a warning. A flag left at its default never conflicts.

    Returns:
        Refused flags as ``--flag VALUE (recorded R)`` and warnings for the ignored ones.

    Raises:
        PlanError: If ``--agent-config`` is not a JSON object.
    """
    recorded: list[tuple[str, object, object, object]] = [
        ("--env", a.env, _DEFAULTS.env, info.env_id),
        ("--agent", a.agent, _DEFAULTS.agent, info.agent),
        ("--seed", a.seed, _DEFAULTS.seed, info.seed),
        ("--backend", a.backend, _DEFAULTS.backend, info.backend),
        ("--workers", a.workers, _DEFAULTS.workers, info.workers),
        ("--label", a.label, _DEFAULTS.label, info.label),
    ]
    for flag, field in _BUDGET_FLAGS.items():
        recorded.append((flag, getattr(a, field), getattr(_DEFAULTS, field), info.budget.get(field)))
    cfg = info.agent_config
    for flag, field in _MODEL_FLAGS.items():
        recorded.append((flag, getattr(a, field), None, cfg.get(field)))
    try:
        overrides = json.loads(a.agent_config)
    except ValueError as e:
        raise PlanError(f"bad --agent-config: {e}") from e
    if not isinstance(overrides, dict):
        raise PlanError("bad --agent-config: not a JSON object")
    for key, value in overrides.items():
        recorded.append((f"--agent-config {key}=", value, object(), cfg.get(key)))
    refused = [
        f"{flag}{'' if flag.endswith('=') else ' '}{given} (recorded {'unset' if rec is None else rec})"
        for flag, given, default, rec in recorded
        if _differs(given, default, rec)
    ]
    if info.leaderboard_dir is not None and a.leaderboard_dir != _DEFAULTS.leaderboard_dir:
        if not _same_dir(a.leaderboard_dir, info.leaderboard_dir):
            refused.append(f"--leaderboard-dir {a.leaderboard_dir} (recorded {info.leaderboard_dir})")
    ignored = []
    if _differs(a.mode, _DEFAULTS.mode, info.mode):
        ignored.append(f"--mode {a.mode} ignored: the run continues in its recorded mode {info.mode}")
    if a.results_dir != _DEFAULTS.results_dir and not _same_dir(a.results_dir, run_dir.parent):
        ignored.append(f"--results-dir {a.results_dir} ignored: a resumed run stays in {run_dir}")
    return refused, ignored


def _plan_resume(a: RunArgs, run_dir: Path) -> RunPlan | ReaddPlan:
    from agents.registry import get_agent_class

    try:
        # Read only: the execution takes the run's lock when it opens the run to continue it.
        with RunStore.open(run_dir, readonly=True) as store:
            info = store.info
    except (RunStoreError, OSError) as e:
        raise PlanError(user_error(e)) from e
    refused, ignored = resume_conflicts(a, info, run_dir)
    if refused:
        raise PlanError(
            f"--resume {run_dir} continues the run as recorded, but "
            + "; ".join(refused)
            + ": drop those flags, or start a new run without --resume"
        )
    v = default_registry().get(info.env_id)
    if info.status == "finished":
        return ReaddPlan(run_dir=run_dir, variant=v)
    try:
        budget = Budget.model_validate(info.budget)
    except ValueError as e:
        raise PlanError(f"{run_dir}: the run's budget is invalid: {e}") from e
    cls = get_agent_class(info.agent)
    agent = cls(cls.Config.model_validate(info.agent_config))
    try:  # the plan is remade for this machine (its GPUs may differ from the first start's)
        gpu_env, gpu_lines = gpu_memory_plan(v, agent, info.backend, info.workers)
    except ValueError as e:
        raise PlanError(str(e)) from e
    # The run's own settings, never the resuming shell's defaults (older runs: the flag).
    return RunPlan(
        variant=v,
        agent=agent,
        budget=budget,
        backend=info.backend,  # type: ignore[arg-type]
        workers=info.workers,
        mode=info.mode,
        seed=info.seed,
        results_dir=run_dir.parent,
        leaderboard_dir=Path(info.leaderboard_dir) if info.leaderboard_dir is not None else a.leaderboard_dir,
        resume=run_dir,
        gpu_env=tuple(sorted(gpu_env.items())),
        gpu_lines=tuple(gpu_lines),
        warnings=tuple(ignored),
        label=info.label,
    )


def _check_budget(a: RunArgs) -> None:
    """Refuse a budget no run can use before anything exists (a 0-evaluation run once left a row).

    Raises:
        PlanError: If ``--max-evaluations`` is below 1, ``--max-wall-s`` is not a positive number
            or ``--max-cost-usd`` is negative or not a number.
    """
    if a.max_evaluations < 1:
        n = a.max_evaluations
        raise PlanError(f"--max-evaluations must be at least 1 (it counts the initial program), not {n}")
    if a.max_wall_s is not None and not (math.isfinite(a.max_wall_s) and a.max_wall_s > 0):
        raise PlanError(f"--max-wall-s must be a positive number of seconds, not {a.max_wall_s}")
    if a.max_cost_usd is not None and not (math.isfinite(a.max_cost_usd) and a.max_cost_usd >= 0):
        raise PlanError(f"--max-cost-usd must be a non-negative number of US dollars, not {a.max_cost_usd}")


def plan_run(a: RunArgs) -> RunPlan | ReaddPlan:
    """Resolve and check ``bench run``'s options into a plan, starting nothing.

    Raises:
        PlanError: If the options do not describe a run that can start here (missing ids,
            a subset variant, bad agent configuration, missing data or GPU, a failed preflight,
            an unusable backend, an unreadable run to resume).
        UnknownIdError: If the variant or agent id is unknown (the message suggests close ids).
        ManifestError: If the variant's manifest is invalid.
    """
    if a.label is not None:
        from harness.compare.labels import check_label

        try:
            check_label(a.label)
        except ValueError as e:
            raise PlanError(str(e)) from e
    if a.resume is not None:
        return _plan_resume(a, a.resume)
    _check_budget(a)
    if a.agent is None or a.env is None:
        raise PlanError("--agent and --env are required (or --resume RUN_DIR)")
    v = default_registry().get(a.env)
    if v.derived_from is not None:
        raise PlanError(
            f"{v.id} is a validation subset of {v.base_id}; runs use full variants "
            "(subset ids are for `bench eval` and agents' validation evaluations)"
        )
    agent = _configured_agent(a)
    problem = data_problem(v) or gpu_problem(v, a.backend)
    if problem:
        raise PlanError(problem)
    try:
        gpu_env, gpu_lines = gpu_memory_plan(v, agent, a.backend, a.workers)
    except ValueError as e:  # a GPU path asked for on a machine without one
        raise PlanError(str(e)) from e
    workers, warning = resolve_workers(v, a.backend, a.workers, gpu_env)
    try:
        agent.preflight()
        check_backend(a.backend)
    except (ValueError, BackendUnavailable) as e:
        raise PlanError(str(e)) from e
    return RunPlan(
        variant=v,
        agent=agent,
        budget=Budget(
            max_evaluations=a.max_evaluations, max_wall_s=a.max_wall_s, max_cost_usd=a.max_cost_usd
        ),
        backend=a.backend,
        workers=workers,
        mode=a.mode,
        seed=a.seed,
        results_dir=a.results_dir,
        leaderboard_dir=a.leaderboard_dir,
        warnings=(warning,) if warning else (),
        gpu_env=tuple(sorted(gpu_env.items())),
        gpu_lines=tuple(gpu_lines),
        label=a.label,
    )
