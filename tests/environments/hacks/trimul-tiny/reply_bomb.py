# hack: bomb-style reply: a length prefix claiming a 1 TiB header, then a small zip that inflates hugely
# expect: error
# reason: cap
# base: initial-program
import io
import struct
import sys
import zipfile

honest = custom_kernel  # the initial program's kernel, prepended by the runner

_main = sys.modules["__main__"]
_send = _main.send


def _forged(sock, header, arrays=None):
    if header.get("type") != "result":
        return _send(sock, header, arrays)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a0.npy", b"\0" * (16 << 20))
    sock.sendall(struct.pack(">Q", 1 << 40) + buf.getvalue())


_main.send = _forged
