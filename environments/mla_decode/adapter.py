"""Run a GPU MODE MLA submission unmodified: wrap its source so it is given GPU MODE's objects.

The kernel driver (``harness/inside/kernel_driver.py``) loads ``candidate.py`` and calls
``custom_kernel(data)``. :func:`wrap_source` (trusted side) makes ``candidate.py`` the loader of
``inside/loader.py`` with GPU MODE's objects (``inside/gpumode.py``) and the submission as its
arguments; all of that runs on the candidate's side of the call, and the scorer checks the returned
output and cache as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.scoring.api import CandidateRuntime

INSIDE = Path(__file__).resolve().parent / "inside"
COMPAT_FILE = INSIDE / "gpumode.py"
LOADER_FILE = INSIDE / "loader.py"


def wrap_source(submission: str) -> str:
    """The loader source that runs ``submission`` with GPU MODE's ``Config`` / ``KVCache``."""
    loader = LOADER_FILE.read_text(encoding="utf-8")
    compat = COMPAT_FILE.read_text(encoding="utf-8")
    return f"{loader}\n_install({compat!r}, {submission!r})\n"


class GpuModeCandidate:
    """A :class:`CandidateRuntime` whose program text is the wrapped submission."""

    def __init__(self, inner: CandidateRuntime) -> None:
        """Wrap ``inner`` (every other attribute is delegated to it)."""
        self._inner = inner
        self._source = wrap_source(inner.source)

    @property
    def source(self) -> str:
        """The loader with the submission inside."""
        return self._source

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
