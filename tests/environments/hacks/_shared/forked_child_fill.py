# hack: a forked child process (no thread of the driver) fills a shared-memory output after the call returns
# variants: mla-decode-tiny, trimul-tiny
# expect: invalid
# base: initial-program
import os
import time

import torch

honest = custom_kernel  # the initial program's kernel, prepended by the runner
_slot = {}


def custom_kernel(data):
    out = honest(data)  # shapes only: the fill below is what a cheat would defer
    first = out[0] if isinstance(out, tuple) else out
    shared = torch.zeros_like(first).share_memory_()
    if os.fork() == 0:  # the child outlives the call and writes after the clock stopped
        time.sleep(0.002)
        shared.copy_(first)
        os._exit(0)
    return (shared, *out[1:]) if isinstance(out, tuple) else shared
