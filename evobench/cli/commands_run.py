"""Commands that evaluate: ``eval`` (one file) and ``run`` (an agent on an environment).

Their options and help only; :mod:`evobench.cli.run_exec` carries them out (imported when one runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import tyro

from harness.sandbox.names import BackendName, Mode

from .console import err_console

if TYPE_CHECKING:
    from .run_plan import RunArgs

EXIT_INTERRUPTED = 130
"""Exit code of a run stopped by Ctrl-C (``run_exec`` uses the same)."""
EXIT_USAGE = 2


def eval_program(
    program: tyro.conf.Positional[Path],
    env: str,
    backend: BackendName = "local",
    mode: Mode = "cold",
    json_out: Annotated[bool, tyro.conf.arg(name="json")] = False,
) -> int:
    """Score one program file on one environment variant in the sandbox.

    Exit code: 0 ok, 1 candidate failure (invalid / error / timeout), 2 usage, 3 infra error.

    Args:
        program: The candidate program file.
        env: Variant id, e.g. ``eplb-tiny``.
        backend: Where to evaluate.
        mode: ``cold`` (fresh interpreter) or ``warm`` (fork from a pre-imported zygote).
        json_out: Print the full result as JSON.
    """
    from .run_exec import evaluate_file

    return evaluate_file(program, env, backend, mode, json_out)


def run(
    agent: str | None = None,
    env: str | None = None,
    seed: int = 0,
    backend: BackendName = "local",
    workers: int = 0,
    max_evaluations: int = 50,
    max_wall_s: float | None = None,
    max_cost_usd: float | None = None,
    agent_config: str = "{}",
    model: str | None = None,
    advisor_model: str | None = None,
    implementer_model: str | None = None,
    mode: Mode = "warm",
    results_dir: Path = Path("results"),
    leaderboard_dir: Path = Path("leaderboards"),
    resume: Path | None = None,
    no_progress: bool = False,
    place: Literal["here", "modal"] = "here",
    gpu: str | None = None,
    label: str | None = None,
) -> int:
    """Run an agent on an environment variant, recording every candidate; or resume a killed run.

    Args:
        agent: Agent id (see ``bench agents``).
        env: Variant id (see ``bench envs``).
        seed: Master seed.
        backend: Evaluation backend.
        workers: Parallel evaluations (0: one per core; for a GPU variant one per GPU here, on Modal 1).
        max_evaluations: Evaluation budget (includes the initial program).
        max_wall_s: Wall-clock budget in seconds.
        max_cost_usd: LLM cost budget in US dollars.
        agent_config: JSON object of agent configuration overrides.
        model: LLM for every role of an LLM agent (litellm model string, e.g. ``gemini/gemini-2.5-pro``
            or ``offline/pacevolve`` for the offline proposer); sets the config field ``model``.
        advisor_model: The advisor: a litellm model for ``pacevolve``; for the learning agents the
            trainable policy (``smollm2-135m``, ``tiny-random``, a ``.gguf`` file, a directory or
            an HF id); sets ``advisor_model``.
        implementer_model: litellm model (or ``offline/pacevolve``) that writes the code; sets
            ``implementer_model``.
        mode: ``warm`` (zygote fork per candidate) or ``cold`` (fresh interpreter per candidate).
        results_dir: Where run directories are created (checked writable before the run starts).
        leaderboard_dir: Where the finished run's leaderboard row is appended (checked writable
            before the run starts, not after it was evaluated).
        resume: A run directory to finish, as recorded: its variant, agent, configuration, models,
            seed, budget, backend, workers and leaderboard. Any of those flags given with a
            different value is refused (exit 2, nothing changed; a flag at its default is no
            conflict); ``--mode`` and ``--results-dir`` are ignored with a warning. A finished
            run with a damaged ``candidates.parquet`` is rebuilt from its journal (as ``bench repair``).
        no_progress: Disable the progress bar.
        place: ``modal``: run the whole run (agent, advisor training) on a Modal container, its
            candidates evaluated in Modal sandboxes (``--backend modal``), its run directory
            synced back into ``--results-dir``; ``--resume`` of such a run places it again.
        gpu: GPU of the Modal run container (``H100``, ``A100-80GB:2``; none by default).
        label: A name for the run's identity in tables, plots and reports (letters, digits,
            ``_ . + -``), instead of the computed ``agent[setting=value]``; identities given the
            same label are told apart by their ``@cfg`` hash.
    """
    # The docstring above is `bench run --help`. The sandbox workers start first (their warm-up
    # overlaps the imports and checks below); the options become a checked plan, which `execute`
    # carries out.
    options = dict(
        agent=agent, env=env, seed=seed, backend=backend, workers=workers,
        max_evaluations=max_evaluations, max_wall_s=max_wall_s, max_cost_usd=max_cost_usd,
        agent_config=agent_config, model=model, advisor_model=advisor_model,
        implementer_model=implementer_model, mode=mode,
        results_dir=results_dir, leaderboard_dir=leaderboard_dir, resume=resume, label=label,
    )  # fmt: skip
    if place == "modal" or gpu is not None or (resume is not None and (resume / "placement.json").exists()):
        from .run_plan import RunArgs

        return _run_placed(RunArgs(**options), place, gpu)  # type: ignore[arg-type]

    from .run_warmup import adopt, start_early, stop

    early = None
    try:
        early = start_early(env, backend, workers, mode, resume)
        from .run_exec import execute
        from .run_plan import PlanError, RunArgs, RunPlan, plan_run

        args = RunArgs(**options)  # type: ignore[arg-type]
        try:
            plan = plan_run(args)
        except PlanError as e:
            err_console.print(f"bench: error: {e}")
            return e.exit_code
        for warning in plan.warnings if isinstance(plan, RunPlan) else ():
            err_console.print(f"bench: warning: {warning}")
        started, early = adopt(early, plan), None  # from here on `execute` owns (and stops) them
    except KeyboardInterrupt:  # Ctrl-C while the early workers warm up: nothing exists yet
        err_console.print("interrupted before the run started; nothing was created")
        return EXIT_INTERRUPTED
    finally:
        if early is not None:  # refused options, an unknown id, Ctrl-C: stop them at once
            stop(early)
    return execute(plan, no_progress=no_progress, backend=started)


def _run_placed(args: RunArgs, place: str, gpu: str | None) -> int:
    """``--place modal`` (or ``--resume`` of a placed run): the run goes to a Modal container."""
    import sys

    from harness.sandbox.modal_backend.client import ModalInfraError
    from harness.sandbox.modal_backend.run_sdk import SdkRunHost

    from .run_place import PlaceRequest, place_run
    from .run_plan import PlanError

    def err(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    if args.resume is None and place != "modal":
        err("bench: error: --gpu is the GPU of a Modal run container: add --place modal")
        return EXIT_USAGE
    if args.backend not in ("local", "modal"):
        err(f"bench: error: a run placed on Modal evaluates in Modal sandboxes, not --backend {args.backend}")
        return EXIT_USAGE
    try:
        return place_run(
            PlaceRequest(args, gpu), SdkRunHost(), out=lambda line: print(line, flush=True), err=err
        )
    except PlanError as e:
        err(f"bench: error: {e}")
        return e.exit_code
    except (ModalInfraError, ValueError) as e:
        err(f"bench: error: {e}")
        return EXIT_USAGE
