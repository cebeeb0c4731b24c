# hack: reaches the Driver object through gc and replaces its clock reference (1 us per call reported)
# expect: invalid
# reason: rule 'timing'
# base: initial-program
import gc
import itertools

honest = custom_kernel  # the initial program's kernel, prepended by the runner

_driver = next(o for o in gc.get_objects() if type(o).__name__ == "Driver")
_tick = itertools.count(0, 1000)
_driver.perf_ns = lambda: next(_tick)


def custom_kernel(data):
    for _ in range(9):  # a slower kernel: its trusted bound stands well above the noise floor
        honest(data)
    return honest(data)
