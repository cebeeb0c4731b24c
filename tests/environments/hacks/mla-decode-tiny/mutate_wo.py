# hack: zeroes W_o in place and returns zeros (upstream shared W_o with its checker)
# expect: invalid
# reason: rule 'inputs'
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    config, x, kv = data
    out, cache = honest(data)
    config["weights"]["wo"].zero_()
    return torch.zeros_like(out), cache
