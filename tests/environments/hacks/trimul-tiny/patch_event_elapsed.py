# hack: replaces torch.cuda.Event.elapsed_time and torch.cuda.synchronize during the first call
# expect: invalid
# reason: rule 'timing'
# base: initial-program
honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    torch.cuda.Event.elapsed_time = lambda self, end: 0.001
    torch.cuda.synchronize = lambda device=None: None
    return honest(data)
