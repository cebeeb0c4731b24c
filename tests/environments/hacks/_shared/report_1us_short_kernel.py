# hack: the honest kernel (shorter than the ~0.5 ms transport) reported as 1 us per request via send
# variants: mla-decode-tiny, trimul-tiny
# expect: invalid
# reason: rule 'timing'
# base: initial-program
import sys

_main = sys.modules["__main__"]
_send = _main.send


def _forged(sock, header, arrays=None):
    if header.get("type") == "result":
        header = {**header, "host": 1e-6}
    return _send(sock, header, arrays)


_main.send = _forged
