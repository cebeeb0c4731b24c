# hack: uses the input tensor as scratch space (in-place), corrupting the caller's input
# expect: invalid
# reason: rule 'inputs'
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    y = honest(data)
    data[0].copy_(y)
    return data[0]
