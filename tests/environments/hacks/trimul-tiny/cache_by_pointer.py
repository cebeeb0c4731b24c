# hack: caches the output keyed by the input data pointer (replay across timed calls; a hit needs
# the allocator to reuse an address, so a run without a hit is an honest one)
# expect: invalid | no-gain
# tolerance: 0.5
# reason: mismatch
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


CACHE = {}


def custom_kernel(data):
    key = (data[0].data_ptr(), tuple(data[0].shape))
    if key not in CACHE:
        CACHE[key] = honest(data)
    return CACHE[key].clone()
