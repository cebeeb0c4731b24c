"""Runs INSIDE the sandbox, in a fresh interpreter: evaluate the candidate once per split.

It is also the family's ``sandbox_driver`` (loaded as a module next to the candidate in the fitting
process): the scorer's fit calls :func:`equation` through ``CandidateRuntime.call_driver``, so both
phases call the candidate's ``equation`` the same way (:func:`_call`).

The trusted scorer copies this file, the candidate's source and ``inputs.npz`` (input columns of
every split plus one or more fitted parameter vectors, one per row of ``params``; never a target)
into a directory of the candidate's work directory and runs ``python -I -B <dir>/sandbox_driver.py``.
The predictions go back on stdout as one frame at the very end: ``MAGIC``, the payload length
(8 bytes, little-endian) and the float64 predictions, for each parameter vector in turn, of all
splits concatenated in the order of ``splits``. Nothing here is secret; the
candidate can read and even patch this code, which gains it nothing: the frame only carries its own
predictions, computed without ever seeing a target.

Exit codes: 0 success, 3 a task rule is broken (message on stderr), anything else an error.
Standard library and numpy only.
"""

import importlib.util
import inspect
import os
import struct
import sys

import numpy as np

MAGIC = b"\x00EVOBENCH-LLM-SR-PREDICTIONS\x00"
RULE_EXIT = 3


def _call(equation, columns, params):
    """Call ``equation(*columns, params)``; a keyword-only ``params`` is passed by name.

    The declared signature reads ``equation(*input_columns, params)``; taken literally as Python,
    that makes ``params`` keyword-only, and such a candidate is honouring the contract too.
    """
    if _params_keyword_only(equation):
        return equation(*columns, params=params)
    return equation(*columns, params)


def _params_keyword_only(equation):
    """Whether ``equation`` declares ``params`` keyword-only; cached, as a fit makes hundreds of calls."""
    key = id(equation)
    if _KEYWORD_ONLY.get(key, (None,))[0] is not equation:
        try:
            declared = inspect.signature(equation).parameters.get("params")
        except (TypeError, ValueError):  # no introspectable signature (e.g. a builtin): positional
            declared = None
        keyword_only = declared is not None and declared.kind is inspect.Parameter.KEYWORD_ONLY
        _KEYWORD_ONLY[key] = (equation, keyword_only)
    return _KEYWORD_ONLY[key][1]


_KEYWORD_ONLY = {}


def equation(candidate, *args):
    """Sandbox-driver entry (``CandidateRuntime.call_driver``): the candidate's equation on ``args``.

    ``args`` are the input columns followed by the parameter vector, as the fitting scorer sends
    them; a missing ``equation`` raises here, in the sandbox, like any other candidate fault.
    """
    fn = getattr(candidate, "equation", None)
    if not callable(fn):
        raise AttributeError("the candidate has no function 'equation' (the declared entry point)")
    return _call(fn, args[:-1], args[-1])


def main() -> None:
    """Load the inputs and the candidate, predict every split, write the frame, exit."""
    sys.dont_write_bytecode = True
    here = os.path.dirname(os.path.abspath(__file__))
    with np.load(os.path.join(here, "inputs.npz"), allow_pickle=False) as z:
        splits = [str(s) for s in z["splits"]]
        param_sets = np.atleast_2d(np.array(z["params"], dtype=np.float64))
        inputs = {s: np.array(z["x_" + s], dtype=np.float64) for s in splits}
    spec = importlib.util.spec_from_file_location("candidate", os.path.join(here, "candidate.py"))
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    equation = getattr(module, "equation", None)
    if not callable(equation):
        raise AttributeError("the candidate has no function 'equation'")
    chunks = []
    for params, s in [(p, s) for p in param_sets for s in splits]:
        x = inputs[s]
        columns = [np.ascontiguousarray(x[:, j]) for j in range(x.shape[1])]
        out = _call(equation, columns, params.copy())
        if not isinstance(out, np.ndarray) or out.dtype.kind not in "fiu" or out.shape != (x.shape[0],):
            kind = type(out).__name__
            detail = f"{kind} {getattr(out, 'dtype', '')} shape {getattr(out, 'shape', None)}"
            sys.stderr.write(
                f"rule 'shape': on {s}, equation returned {detail}; expected a real numpy array "
                f"of shape ({x.shape[0]},)\n"
            )
            sys.stderr.flush()
            os._exit(RULE_EXIT)
        chunks.append(np.ascontiguousarray(out, dtype="<f8").tobytes())
    payload = b"".join(chunks)
    sys.stdout.flush()
    sys.stdout.buffer.write(MAGIC + struct.pack("<Q", len(payload)) + payload)
    sys.stdout.buffer.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
