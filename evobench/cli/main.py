"""``bench``: the evobench command line (tyro subcommands)."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import tyro

from harness.envs.manifest import ManifestError
from harness.envs.registry import UnknownIdError

from . import (
    commands_compare,
    commands_doctor,
    commands_images,
    commands_info,
    commands_key,
    commands_modal,
    commands_new_env,
    commands_reference,
    commands_repair,
    commands_run,
    commands_sweep,
)

EXIT_USAGE = 2

COMMANDS: dict[str, Any] = {
    "envs": commands_info.envs,
    "agents": commands_info.agents,
    "eval": commands_run.eval_program,
    "run": commands_run.run,
    "sweep": commands_sweep.sweep,
    "leaderboard": commands_info.leaderboard,
    "data": commands_info.data,
    "images": commands_images.images,
    "modal": commands_modal.modal,
    "doctor": commands_doctor.doctor,
    "key": commands_key.key,
    "new-env": commands_new_env.new_env,
    "compare": commands_compare.compare,
    "plot": commands_compare.plot,
    "report": commands_compare.report,
    "reference": commands_reference.reference,
    "repair": commands_repair.repair,
}


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run one subcommand and return its exit code."""
    logging.basicConfig(
        level=os.environ.get("EVOBENCH_LOG", "WARNING"), format="%(levelname)s %(name)s: %(message)s"
    )
    args = sys.argv[1:] if argv is None else argv
    if args[:2] == ["leaderboard", "add"]:  # a verb of its own beside ``bench leaderboard --env``
        from . import commands_leaderboard_add

        return commands_leaderboard_add.main(args[2:])
    try:
        code = tyro.extras.subcommand_cli_from_dict(
            COMMANDS,
            prog="bench",
            description="evobench: fair benchmarks for evolutionary-search agents.",
            args=argv,
        )
    except (UnknownIdError, ManifestError) as e:
        print(f"bench: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    return int(code or 0)


if __name__ == "__main__":
    sys.exit(main())
