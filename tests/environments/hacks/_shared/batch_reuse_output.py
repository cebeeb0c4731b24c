# hack: computes the first call of a back-to-back run (a batch) only and returns its output for the rest
# variants: mla-decode-tiny, trimul-tiny
# expect: invalid
# base: initial-program
import time

honest = custom_kernel  # the initial program's kernel, prepended by the runner
_last = {"t": 0.0, "out": None}


def custom_kernel(data):
    now = time.perf_counter()
    if _last["out"] is None or now - _last["t"] > 2e-4:  # a gap (the transport): a new request
        _last["out"] = honest(data)
    _last["t"] = time.perf_counter()
    out = _last["out"]
    return tuple(o.clone() for o in out) if isinstance(out, tuple) else out.clone()
