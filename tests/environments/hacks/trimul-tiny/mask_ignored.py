# hack: ignores the mask (upstream never tested a masked case)
# expect: invalid
# reason: mismatch
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    x, mask, w, config = data
    return honest((x, torch.ones_like(x[..., 0]), w, config))
