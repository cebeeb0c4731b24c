"""``bench new-env``: write a working skeleton of an environment family.

The skeleton is a toy task that evaluates ``ok`` as written (``bench eval``, a ``random-search``
run): every ``env.toml`` key with a comment, a trusted scorer, an initial program, a prompt,
offline mutation operators and a tiny test. Templates: :mod:`harness.envs.skeleton_files`.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from string import Template

from . import skeleton_files as files

NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
"""A family name: a lower-case Python package name of at most 40 characters."""
Y_INIT = 0.266749786061165
"""Mean squared error of the skeleton's initial program on the full variant's 256 points."""
Y_INIT_TINY = 0.31856869315750996
"""The same on the tiny variant's 16 points (the skeleton's own test checks both stay exact)."""
Y_TARGET = 0.001
"""The skeleton's "solved" mean squared error."""


class SkeletonError(ValueError):
    """The skeleton cannot be written (bad name, existing directory); the message is one line."""


@dataclass(frozen=True)
class Skeleton:
    """What :func:`write_skeleton` wrote."""

    family_dir: Path
    """The new family folder."""
    files: tuple[Path, ...]
    """Every file written, in the order written."""
    tiny_id: str
    """Id of the tiny variant (``<prefix>-tiny``)."""
    full_id: str
    """Id of the full variant."""


def check_name(name: str) -> str:
    """Validate a family name and return its variant id prefix (``_`` becomes ``-``).

    Raises:
        SkeletonError: If the name is not a lower-case package name or is a Python keyword.
    """
    if not NAME_PATTERN.match(name) or keyword.iskeyword(name):
        raise SkeletonError(
            f"invalid environment name {name!r}: use a lower-case Python package name "
            "(a letter, then letters, digits or _; at most 40 characters), e.g. knapsack or my_task"
        )
    return name.replace("_", "-")


def write_skeleton(name: str, parent: Path, taken: Collection[str] = ()) -> Skeleton:
    """Write ``parent/name/`` with a working skeleton family.

    Args:
        name: Family name (a lower-case package name).
        parent: Directory that holds family folders (the built-in ``environments`` directory or
            one named in ``EVOBENCH_ENV_PATH``); created if missing.
        taken: Family names and variant ids already defined (the new family must not collide).

    Returns:
        What was written.

    Raises:
        SkeletonError: If the name is invalid or taken, or ``parent/name`` already exists.
        OSError: If the files cannot be written.
    """
    prefix = check_name(name)
    tiny_id = f"{prefix}-tiny"
    clash = sorted({name, prefix, tiny_id} & set(taken))
    if clash:
        raise SkeletonError(
            f"environment {name!r} would clash with an existing family or variant {clash[0]!r}"
        )
    family_dir = parent / name
    if family_dir.exists() or family_dir.is_symlink():
        raise SkeletonError(f"{family_dir} already exists; choose another name or --dir")
    cls = "".join(part.capitalize() for part in name.split("_"))
    subst = {
        "name": name,
        "prefix": prefix,
        "cls": cls,
        "y_init": repr(Y_INIT),
        "y_init_tiny": repr(Y_INIT_TINY),
        "y_target": repr(Y_TARGET),
    }
    plan = [
        ("__init__.py", files.INIT_PY),
        ("env.toml", files.ENV_TOML),
        ("scorer.py", files.SCORER_PY),
        ("initial_program.py", files.INITIAL_PROGRAM_PY),
        ("prompt.md", files.PROMPT_MD),
        ("mutations.py", files.MUTATIONS_PY),
        (f"test_{name}.py", files.TEST_PY),
    ]
    family_dir.mkdir(parents=True)
    written = []
    for rel, template in plan:
        path = family_dir / rel
        path.write_text(Template(template).substitute(subst), encoding="utf-8")
        written.append(path)
    return Skeleton(family_dir=family_dir, files=tuple(written), tiny_id=tiny_id, full_id=prefix)
