"""The ``candidate.py`` of a GPU MODE submission: runs INSIDE the sandbox, as the candidate's module.

``environments/mla_decode/adapter.py`` ships this source followed by one line,
``_install(<gpumode.py source>, <submission source>)``: it installs :mod:`.gpumode` as the modules
``reference`` and ``task``, runs the submission as module ``submission``, and :func:`custom_kernel`
converts evobench's wire values ``[config dict, x, {"data", "seq_len"}]`` into GPU MODE's
``(Config, x, KVCache)`` (objects that also answer evobench's dict indexing). Everything here is the
candidate's side of the call; the scorer checks the returned output and cache as for any program.
"""

import sys as _sys
import types as _types

_ref = None
_sub = None


def _module(name, source, filename):
    mod = _types.ModuleType(name)
    mod.__file__ = filename
    _sys.modules[name] = mod
    exec(compile(source, filename, "exec"), mod.__dict__)
    return mod


def _install(compat, submission):
    global _ref, _sub
    _ref = _module("reference", compat, "reference.py")
    _sys.modules["task"] = _ref
    _sub = _module("submission", submission, "submission.py")
    if not callable(getattr(_sub, "custom_kernel", None)):
        raise AttributeError("the submission has no function 'custom_kernel'")


def custom_kernel(data):
    """GPU MODE's ``custom_kernel((Config, x, KVCache))`` called with evobench's wire values."""
    config, x, kv = data
    cache = _ref.KVCache(None, data=kv["data"], seq_len=int(kv["seq_len"]))
    return _sub.custom_kernel((_ref.Config.from_evobench(config, cache.seq_len), x, cache))
