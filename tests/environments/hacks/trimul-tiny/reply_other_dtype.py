# hack: the reply carries the right values as float64 (twice the bytes the trusted side expects)
# expect: invalid
# reason: rule 'dtype'
# base: initial-program
import sys

honest = custom_kernel  # the initial program's kernel, prepended by the runner

_main = sys.modules["__main__"]
_send = _main.send


def _forged(sock, header, arrays=None):
    if header.get("type") == "result":
        arrays = [("float64", a.astype("float64")) for _, a in arrays]
    return _send(sock, header, arrays)


_main.send = _forged
