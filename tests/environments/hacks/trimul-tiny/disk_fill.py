# hack: writes 1 GiB of files into its working directory (each file under the per-file limit) at
# import, then runs the honest kernel: without a disk quota, parallel evaluations fill the host disk
# expect: error
# reason: disk quota
# base: initial-program
import os as _os

_block = b"\0" * (1 << 20)
for _i in range(4):
    with open(f"fill_{_i}.bin", "wb") as _f:
        for _ in range(256):
            _f.write(_block)
_ = _os
