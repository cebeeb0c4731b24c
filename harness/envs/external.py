"""Environment families outside the repository: ``EVOBENCH_ENV_PATH`` and Python entry points.

Each place found here is a *root*: a directory holding family folders
(``<root>/<family>/env.toml``), like the built-in ``environments`` package, or one family folder
itself (it holds an ``env.toml``). The registry loads the built-in root first and these after it;
a family or variant id that an earlier root already defines is refused (the message names both
manifests). Family code is imported by path under a private package per root
(``harness.envs.registry``), never from the candidate's side, and every root is masked in the
sandbox (``harness.sandbox.isolation.hidden_paths``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
from functools import cache
from pathlib import Path

log = logging.getLogger(__name__)

PATH_VAR = "EVOBENCH_ENV_PATH"
"""Environment variable: directories holding family folders, separated by ``os.pathsep`` (``:``)."""
ENTRY_POINT_GROUP = "evobench.environments"
"""Entry-point group of installed distributions that ship families: each entry point's value is
an importable package that is one family folder or whose directory holds family folders."""


def path_roots(value: str | None = None) -> list[Path]:
    """The roots listed in ``EVOBENCH_ENV_PATH`` (or ``value``), resolved, in order, without repeats.

    Empty entries are skipped; a missing directory is kept (the registry reports nothing for it,
    and ``bench envs`` lists what it found), so a typo never hides the other roots.
    """
    raw = os.environ.get(PATH_VAR, "") if value is None else value
    out: list[Path] = []
    for part in raw.split(os.pathsep):
        if part.strip():
            p = Path(part.strip()).expanduser().resolve()
            if p not in out:
                out.append(p)
    return out


@cache
def entry_point_roots() -> tuple[Path, ...]:
    """Roots named by installed distributions in the ``evobench.environments`` entry-point group.

    The package is located with ``importlib.util.find_spec`` (its parent packages are imported,
    the package itself is not). One that cannot be found is logged and skipped. Read once per
    process: the installed distributions do not change under a running process.
    """
    from importlib.metadata import entry_points

    out: list[Path] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        module = ep.value.partition(":")[0].strip()
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError) as e:
            log.warning("entry point %s = %s: %s", ep.name, ep.value, e)
            continue
        if spec is None or not spec.submodule_search_locations:
            log.warning("entry point %s = %s: not an importable package", ep.name, ep.value)
            continue
        root = Path(next(iter(spec.submodule_search_locations))).resolve()
        if root not in out:
            out.append(root)
    return tuple(out)


def family_manifests(root: Path) -> list[Path]:
    """The ``env.toml`` files of a root: its own when it is a family folder, else its families'."""
    own = root / "env.toml"
    return [own] if own.is_file() else sorted(root.glob("*/env.toml"))


def external_roots(builtin: Path | None = None) -> list[Path]:
    """Every root outside the built-in one: ``EVOBENCH_ENV_PATH`` first, then entry points.

    Args:
        builtin: The built-in root, left out where a setting names it again.
    """
    out: list[Path] = []
    for root in (*path_roots(), *entry_point_roots()):
        if root != builtin and root not in out:
            out.append(root)
    return out
