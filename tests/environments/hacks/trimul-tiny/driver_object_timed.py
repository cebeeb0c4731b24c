# hack: replaces the Driver object's timed method (via sys.modules['__main__']) to report 1 us
# expect: invalid
# reason: rule 'timing'
# base: initial-program
import gc
import sys

honest = custom_kernel  # the initial program's kernel, prepended by the runner

_cls = sys.modules["__main__"].Driver
_driver = next(o for o in gc.get_objects() if isinstance(o, _cls))


def _timed(fn, calls):  # the driver's signature: a batch of input sets, one clock
    return [fn(args) for args in calls], 1e-6, None


_driver.timed = _timed


def custom_kernel(data):
    for _ in range(9):  # a slower kernel: its trusted bound stands well above the noise floor
        honest(data)
    return honest(data)
