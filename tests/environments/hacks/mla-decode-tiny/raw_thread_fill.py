# hack: after an honest first call, returns an empty output; a raw _thread thread (limbo lock held) fills it
# expect: invalid
# reason: rule 'threads'
# base: initial-program
import _thread
import threading

honest = custom_kernel  # the initial program's kernel, prepended by the runner
calls = [0]


def custom_kernel(data):
    calls[0] += 1
    if calls[0] == 1:  # an honest first call: threads it leaves may join the baseline
        return honest(data)
    config, x, kv = data
    out = torch.empty((x.shape[0], 1, config["dim"]), dtype=torch.bfloat16)
    started = _thread.allocate_lock()
    started.acquire()

    def fill():
        with threading._active_limbo_lock:
            started.release()
            out.copy_(honest(data)[0])

    _thread.start_new_thread(fill, ())
    started.acquire()
    return out, kv["data"]
