# hack: returns its input tensor (same shape and dtype as the output)
# expect: invalid
# reason: mismatch
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    return data[0]
