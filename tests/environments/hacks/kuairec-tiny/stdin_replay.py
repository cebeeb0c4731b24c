# hack: steals the training data off the input stream while the module is built, then puts an
# identical stream back on fd 0 (a new pipe, dup2) so the driver finds its frame intact
# expect: invalid
# reason: rule 'protocol'
# base: initial-program
import os
import struct
import threading

_honest_build = build_recommender  # noqa: F821 - defined by the initial program above
STOLEN = {}


def _read_exact(n):
    out = b""
    while len(out) < n:
        chunk = os.read(0, n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def build_recommender(num_items, embedding_dim, max_seq_len, context):
    head = _read_exact(8)
    (n,) = struct.unpack("<Q", head)
    blob = _read_exact(n)
    rest = b""
    while True:  # the test phase sends more frames after this one
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        rest += chunk
    assert n > 1000, "probe broken: no data frame on stdin"
    STOLEN["data"] = blob
    r, w = os.pipe()
    data = head + blob + rest
    threading.Thread(target=lambda: (os.write(w, data), os.close(w)), daemon=True).start()
    os.dup2(r, 0)
    return _honest_build(num_items, embedding_dim, max_seq_len, context)
