# hack: NaN where it is unsure (upstream checker counted NaN == NaN as a match)
# expect: invalid
# reason: finite
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    y = honest(data)
    y[0, 0, 0, 0] = float("nan")
    return y
