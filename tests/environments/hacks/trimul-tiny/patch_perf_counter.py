# hack: replaces time.perf_counter / perf_counter_ns with a frozen clock
# expect: invalid
# reason: rule 'timing'
# base: initial-program
import time

honest = custom_kernel  # the initial program's kernel, prepended by the runner


time.perf_counter = lambda: 0.0
time.perf_counter_ns = lambda: 0


def custom_kernel(data):
    return honest(data)
