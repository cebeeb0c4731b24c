"""``bench new-env``: write a working skeleton of an environment family."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import tyro

from .console import console, err_console

EXIT_USAGE = 2


def new_env(
    name: Annotated[str, tyro.conf.Positional, tyro.conf.arg(metavar="NAME")],
    dir: Annotated[Path | None, tyro.conf.arg(metavar="PATH")] = None,
) -> int:
    """Write a working skeleton of an environment family: NAME/ with env.toml, scorer, program, prompt, test.

    Every env.toml key is there with a comment saying what it does. The skeleton is a toy task that
    evaluates ok as written; its tiny variant is NAME-tiny (underscores become hyphens in ids).
    A directory outside the repository works once it is listed in EVOBENCH_ENV_PATH (the command
    prints the line to run). Refuses an invalid name, a name already taken and an existing folder.

    Args:
        name: Family name: a lower-case Python package name (e.g. knapsack, my_task).
        dir: Directory to create NAME/ in (default: the built-in environments directory).
    """
    from harness.envs.external import PATH_VAR
    from harness.envs.registry import default_registry, environments_root
    from harness.envs.skeleton import SkeletonError, write_skeleton

    reg = default_registry()
    parent = (dir.expanduser() if dir is not None else environments_root()).resolve()
    taken = {*reg.ids(), *reg.families(), *reg.errors}
    try:
        sk = write_skeleton(name, parent, taken)
    except (SkeletonError, OSError) as e:
        err_console.print(f"bench: error: {e}")
        return EXIT_USAGE
    console.print(f"wrote environment family {name} in {sk.family_dir}:")
    for path in sk.files:
        console.print(f"  {path.name}")
    q = shlex.quote
    steps = []
    if parent not in reg.roots:
        steps.append(f"export {PATH_VAR}={q(str(parent))}${{{PATH_VAR}:+:${PATH_VAR}}}")
    steps += [
        "bench envs --family " + sk.tiny_id,
        f"bench eval {q(str(sk.family_dir / 'initial_program.py'))} --env {sk.tiny_id}",
        f"bench run --agent random-search --env {sk.tiny_id} --max-evaluations 3",
        f"python -m pytest -q {q(str(sk.files[-1]))}",
    ]
    console.print("next:", highlight=False)
    for s in steps:
        console.print(f"  {s}", highlight=False, markup=False)
    return 0
