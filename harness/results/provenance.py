"""Provenance of a run: package versions, the git state of the checkout and the host."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

DEFAULT_PACKAGES: tuple[str, ...] = (
    "evobench",
    "torch",
    "numpy",
    "pandas",
    "pyarrow",
    "pydantic",
    "litellm",
    "tyro",
    "rich",
)
"""Distributions whose versions can change a run's results."""


def package_versions(names: Iterable[str] = DEFAULT_PACKAGES) -> dict[str, str]:
    """Installed versions of the given distributions; ones not installed are skipped.

    Args:
        names: Distribution names as known to pip.

    Returns:
        Name -> version, in the order given.
    """
    out: dict[str, str] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _git(path: Path, *args: str, timeout: float) -> str | None:
    """Run one git command in ``path``; its stripped stdout, or None on any failure."""
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
    try:
        proc = subprocess.run(
            ["git", "-C", str(path), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    return proc.stdout.strip()


def git_state(
    path: str | os.PathLike[str] | None = None, timeout: float = 5.0
) -> tuple[str | None, bool | None]:
    """Commit and dirtiness of the git checkout containing ``path``.

    Dirtiness considers tracked files only (staged or not): untracked files such as run
    outputs do not make a checkout dirty.

    Args:
        path: A directory inside the checkout; defaults to the directory of this package.
        timeout: Seconds allowed for each git command.

    Returns:
        ``(commit, dirty)``; ``(None, None)`` when git is missing, times out or ``path`` is not
        in a repository, and ``dirty`` alone is None when the status query fails.
    """
    where = Path(path) if path is not None else Path(__file__).resolve().parent
    commit = _git(where, "rev-parse", "--verify", "HEAD", timeout=timeout)
    if not commit:
        return None, None
    status = _git(where, "status", "--porcelain", "--untracked-files=no", timeout=timeout)
    return commit, (None if status is None else bool(status))


def host_info() -> dict[str, str]:
    """Describe the machine and interpreter running the harness.

    Returns:
        A dict with ``host``, ``python``, ``implementation``, ``platform``, ``machine`` and
        ``cpu_count`` (all strings).
    """
    return {
        "host": socket.gethostname(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": str(os.cpu_count() or 0),
    }
