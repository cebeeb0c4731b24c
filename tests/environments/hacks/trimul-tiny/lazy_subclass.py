# hack: returns a tensor subclass (work could be deferred into the untimed checker)
# expect: invalid
# reason: rule 'output'
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


class Lazy(torch.Tensor):
    pass


def custom_kernel(data):
    return honest(data).as_subclass(Lazy)
