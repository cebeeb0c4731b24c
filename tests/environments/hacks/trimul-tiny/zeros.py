# hack: returns zeros of the right shape and dtype
# expect: invalid
# reason: mismatch
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    return torch.zeros_like(data[0])
