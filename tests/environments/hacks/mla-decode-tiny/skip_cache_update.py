# hack: computes the output but leaves the KV cache as it was (a copy)
# expect: invalid
# reason: kv_cache
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    config, x, kv = data
    before = kv["data"].clone()
    out, _ = honest(data)
    return out, before
