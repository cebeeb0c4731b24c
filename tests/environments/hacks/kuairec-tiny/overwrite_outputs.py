# hack: overwrites its intermediate files behind the driver: every .npy output becomes a 1 MB
# deflate bomb (a zip that inflates to 256 MiB), and every checkpoint a file of the same kind
# expect: error
# base: initial-program
import io
import zipfile

import numpy as np

_BOMB = io.BytesIO()
with zipfile.ZipFile(_BOMB, "w", zipfile.ZIP_DEFLATED) as z:
    with z.open("val_reps.npy", "w", force_zip64=True) as f:
        zeros = b"\0" * (1 << 20)
        for _ in range(256):
            f.write(zeros)
_BOMB = _BOMB.getvalue()


def _evil_save(path, arr, *args, **kwargs):
    with open(path, "wb") as f:
        f.write(_BOMB)


np.save = _evil_save
