# hack: returns an empty output at once; a raw _thread thread holding threading's limbo lock fills it
# expect: invalid
# reason: rule 'threads'
# base: initial-program
import _thread
import threading

honest = custom_kernel  # the initial program's kernel, prepended by the runner


def custom_kernel(data):
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
