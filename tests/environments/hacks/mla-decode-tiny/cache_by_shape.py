# hack: computes once per prefill length and replays the output
# expect: invalid
# reason: mismatch
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner

CACHE = {}


def custom_kernel(data):
    config, x, kv = data
    key = kv["seq_len"]
    if key not in CACHE:
        CACHE[key] = honest(data)[0]
    kv["data"][:, key : key + 1] = x @ config["weights"]["KV_proj_down"].T
    return CACHE[key].clone(), kv["data"]
