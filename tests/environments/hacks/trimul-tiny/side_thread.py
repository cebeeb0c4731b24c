# hack: returns an empty tensor and fills it on a side thread after the timer stops
# expect: invalid
# reason: rule '
# (first call: the output is copied before the fill, a mismatch; later calls: rule 'threads')
# base: initial-program
import threading
import time

honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
    out = torch.empty_like(data[0])

    def fill():
        time.sleep(0.005)
        out.copy_(honest(data))

    threading.Thread(target=fill, daemon=True).start()
    return out
