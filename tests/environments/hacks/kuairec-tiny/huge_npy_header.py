# hack: replaces numpy.save in its process, so the driver's validation outputs become .npy files
# whose header declares shape (2**40, 16) (a trusted np.load would try to allocate 64 TiB)
# expect: error
# reason: expected shape
# base: initial-program
import struct

import numpy as np


def _evil_save(path, arr, *args, **kwargs):
    header = b"{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 16), }"
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header + b"\0" * 4096)


np.save = _evil_save
