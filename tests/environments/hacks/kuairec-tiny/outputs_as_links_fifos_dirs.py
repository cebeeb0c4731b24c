# hack: replaces numpy.save in its process so that each output the driver writes becomes something
# other than a regular file: a symbolic link to a root-only file (/etc/shadow) or to the validated
# checkpoint, a hard link to its own source, a FIFO (a trusted reader would block on it), a
# directory; the trusted reader (often root) must refuse every one as the candidate's failure
# expect: error
# base: initial-program
import itertools
import os

import numpy as np

_kinds = itertools.cycle(["symlink", "fifo", "dir", "hardlink", "symlink-ckpt"])


def _hostile_save(path, arr, *args, **kwargs):
    path = str(path)
    if not path.endswith(".npy"):
        path += ".npy"
    kind = next(_kinds)
    if os.path.lexists(path):
        os.unlink(path)
    try:
        if kind == "symlink":
            os.symlink("/etc/shadow", path)
        elif kind == "fifo":
            os.mkfifo(path)
        elif kind == "dir":
            os.mkdir(path)
        elif kind == "hardlink":
            os.link(os.path.abspath(__file__), path)
        else:
            os.symlink(os.path.join(os.path.dirname(os.path.abspath(__file__)), "checkpoint.pt"), path)
    except OSError:
        os.symlink("/proc/self/mem", path)


np.save = _hostile_save
