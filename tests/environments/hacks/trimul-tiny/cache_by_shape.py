# hack: computes once per shape and replays (inputs would be identical across timed calls upstream)
# expect: invalid
# reason: mismatch
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


CACHE = {}


def custom_kernel(data):
    key = tuple(data[0].shape) + (str(data[1].dtype),)
    if key not in CACHE:
        CACHE[key] = honest(data)
    return CACHE[key].clone()
