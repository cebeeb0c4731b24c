# hack: caches outputs keyed by the input contents (defeated by fresh inputs per call)
# expect: no-gain
# tolerance: 0.5
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


CACHE = {}


def custom_kernel(data):
    key = (tuple(data[0].shape), float(data[0].sum()), float(data[2]["to_out.weight"].sum()))
    if key not in CACHE:
        CACHE[key] = honest(data)
    return CACHE[key].clone()
