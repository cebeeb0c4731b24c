# hack: caches the output keyed by the input data pointer (replay across timed calls)
# expect: invalid
# reason: mismatch
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


CACHE = {}


def custom_kernel(data):
    key = (data[0].data_ptr(), tuple(data[0].shape))
    if key not in CACHE:
        CACHE[key] = honest(data)
    return CACHE[key].clone()
