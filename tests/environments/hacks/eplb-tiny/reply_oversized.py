# hack: returns a valid placement plus a 100 MB array: a reply that size (up to the wire's old
# 512 MiB cap) was read, copied and decoded whole by the trusted worker (480 MB: its peak RSS
# 285 -> 1,216 MB) before the placement was even validated; replies over 64 MiB are now refused
# before a byte of them is read
# expect: error
# reason: exceeds
# base: initial-program
import numpy as np

_honest = rebalance_experts  # noqa: F821 - defined by the initial program above


def rebalance_experts(*args):
    return (*_honest(*args), np.ones(13_000_000, dtype=np.float64))
