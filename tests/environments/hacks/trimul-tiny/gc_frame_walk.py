# hack: walks gc objects and caller frames for a reference output (non-input tensors of the output shape)
# expect: invalid
# reason: mismatch
# base: initial-program
import gc
import sys

honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    x = data[0]
    inputs = {id(t) for t in [data[0], data[1], *data[2].values()]}
    for obj in gc.get_objects():
        if torch.is_tensor(obj) and id(obj) not in inputs and obj.shape == x.shape and obj.dtype == x.dtype:
            return obj.clone()
    f = sys._getframe(1)
    while f is not None:
        for v in list(f.f_locals.values()):
            if torch.is_tensor(v) and id(v) not in inputs and v.shape == x.shape:
                return v.clone()
        f = f.f_back
    return torch.zeros_like(x)  # found nothing
