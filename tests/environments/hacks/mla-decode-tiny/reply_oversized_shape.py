# hack: the reply declares a KV cache of shape (2**40, 2**20) bf16 (allocating first would kill the scorer)
# expect: invalid
# reason: rule 'shape'
# base: initial-program
import json
import struct
import sys

_main = sys.modules["__main__"]
_send = _main.send


def _forged(sock, header, arrays=None):
    if header.get("type") != "result":
        return _send(sock, header, arrays)
    specs = [{"dtype": "bfloat16", "shape": [1, 1, 64]}, {"dtype": "bfloat16", "shape": [2**40, 2**20]}]
    head = json.dumps({**header, "arrays": specs}).encode()
    sock.sendall(struct.pack(">Q", len(head)) + head + b"\0" * 4096)


_main.send = _forged
