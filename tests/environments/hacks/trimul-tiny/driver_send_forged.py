# hack: replaces the driver module's send (sys.modules['__main__'].send) to rewrite the reported time
# expect: invalid
# reason: rule 'timing'
# base: initial-program
import sys

honest = custom_kernel  # the initial program's kernel, prepended by the runner

_main = sys.modules["__main__"]
_send = _main.send


def _forged(sock, header, arrays=None):
    if header.get("type") == "result":
        header = {**header, "host": 1e-6}
    return _send(sock, header, arrays)


_main.send = _forged


def custom_kernel(data):
    for _ in range(9):  # a slower kernel: its trusted bound stands well above the noise floor
        honest(data)
    return honest(data)
