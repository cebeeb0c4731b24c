# hack: the reply's JSON header is nested 200,000 deep (RecursionError in a naive parser)
# expect: error
# reason: malformed
# base: initial-program
import struct
import sys

honest = custom_kernel  # the initial program's kernel, prepended by the runner

_main = sys.modules["__main__"]
_send = _main.send


def _forged(sock, header, arrays=None):
    if header.get("type") != "result":
        return _send(sock, header, arrays)
    head = b'{"type": "result", "host": 0.001, "out": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    sock.sendall(struct.pack(">Q", len(head)) + head)


_main.send = _forged
