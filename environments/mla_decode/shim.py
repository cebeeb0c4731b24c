"""Run a GPU MODE MLA submission unmodified: wrap its source so it is given GPU MODE's objects.

The kernel driver (harness/kernels) loads ``candidate.py`` and calls ``custom_kernel(data)`` with
evobench's wire values ``[config dict, x, {"data", "seq_len"}]``. :func:`wrap_source` makes
``candidate.py`` a small loader that first installs :mod:`.gpumode` as the modules ``reference``
and ``task``, then runs the submission as module ``submission`` and converts the arguments into
``(Config, x, KVCache)`` (objects that also answer evobench's dict indexing). Everything here runs
on the candidate's side of the call; the scorer checks the returned output and cache as before.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.scoring.api import CandidateRuntime

COMPAT_FILE = Path(__file__).with_name("gpumode.py")

_LOADER = """\
import sys as _sys
import types as _types


def _module(name, source, filename):
    mod = _types.ModuleType(name)
    mod.__file__ = filename
    _sys.modules[name] = mod
    exec(compile(source, filename, "exec"), mod.__dict__)
    return mod


_ref = _module("reference", {compat!r}, "reference.py")
_sys.modules["task"] = _ref
_sub = _module("submission", {submission!r}, "submission.py")
if not callable(getattr(_sub, "custom_kernel", None)):
    raise AttributeError("the submission has no function 'custom_kernel'")


def custom_kernel(data):
    config, x, kv = data
    cache = _ref.KVCache(None, data=kv["data"], seq_len=int(kv["seq_len"]))
    return _sub.custom_kernel((_ref.Config.from_evobench(config, cache.seq_len), x, cache))
"""


def wrap_source(submission: str) -> str:
    """The loader source that runs ``submission`` with GPU MODE's ``Config`` / ``KVCache``."""
    return _LOADER.format(compat=COMPAT_FILE.read_text(encoding="utf-8"), submission=submission)


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
