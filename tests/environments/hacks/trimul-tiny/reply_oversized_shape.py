# hack: the reply declares an output of shape (2**40,) (a trusted side that allocates first dies)
# expect: invalid
# reason: rule 'shape'
# base: initial-program
import json
import struct
import sys

honest = custom_kernel  # the initial program's kernel, prepended by the runner

_main = sys.modules["__main__"]
_send = _main.send


def _forged(sock, header, arrays=None):
    if header.get("type") != "result":
        return _send(sock, header, arrays)
    head = json.dumps({**header, "arrays": [{"dtype": "float32", "shape": [2**40]}]}).encode()
    sock.sendall(struct.pack(">Q", len(head)) + head + b"\0" * 4096)


_main.send = _forged
