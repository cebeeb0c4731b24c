# hack: caches outputs across calls and requests keyed by a hash of the input bytes (fresh inputs: never hits)
# variants: mla-decode-tiny, trimul-tiny
# expect: no-gain
# tolerance: 0.5
# tolerance@mla-decode-tiny: 0.6
# (0.6: honest mla-decode-tiny evaluations fall in two modes ~2x apart, docs/trust-model.md;
# a working 0.1x cheat would still count < 0.4x honest)
# base: initial-program
import hashlib

import torch

honest = custom_kernel  # the initial program's kernel, prepended by the runner
_cache = {}


def _key(tree):
    h = hashlib.blake2b(digest_size=16)
    stack = [tree]
    while stack:
        x = stack.pop()
        if torch.is_tensor(x):
            h.update(x.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        else:
            h.update(repr(x).encode())
    return h.digest()


def custom_kernel(data):
    k = _key(data)
    if k not in _cache:
        _cache[k] = honest(data)
    out = _cache[k]
    return tuple(o.clone() for o in out) if isinstance(out, tuple) else out.clone()
