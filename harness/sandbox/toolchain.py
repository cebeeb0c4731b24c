"""Build tools a candidate may use inside its sandbox: ``ninja``, the CUDA toolkit, a user name.

KernelBench's prompt asks for ``torch.utils.cpp_extension.load_inline``, which runs ``ninja`` (pip
puts it beside the interpreter) and, for CUDA sources, ``nvcc`` under ``CUDA_HOME``; ``torch.compile``
names its cache directory after ``getpass.getuser()``, which fails for a uid without a passwd entry
unless ``USER`` / ``LOGNAME`` are set. Measured on an H100 (docs/gpu-check.md): without these,
``load_inline`` failed with "Ninja is required" and ``torch.compile`` with ``KeyError: getpwuid``.
"""

from __future__ import annotations

import os
import shutil
import sys
from functools import cache
from pathlib import Path

SANDBOX_USER = "sandbox"
"""``USER`` / ``LOGNAME`` of candidates: their uid has no passwd entry, and ``getpass.getuser()``
(torch inductor's cache directory, for one) reads these first."""


def interpreter_bin() -> str:
    """The directory of this interpreter: pip-installed build tools (``ninja``, ``cmake``) live there."""
    return str(Path(sys.executable).parent)


@cache
def cuda_home() -> str | None:
    """This machine's CUDA toolkit (``CUDA_HOME``, ``CUDA_PATH``, ``nvcc``'s, /usr/local/cuda), or None."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        home = os.environ.get(var)
        if home and os.path.isdir(home):
            return home
    nvcc = shutil.which("nvcc")
    if nvcc:
        return str(Path(nvcc).resolve().parent.parent)
    return "/usr/local/cuda" if os.path.isdir("/usr/local/cuda/bin") else None
