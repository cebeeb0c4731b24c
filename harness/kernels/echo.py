"""Trusted calibration echo: the kernel driver's request loop with a kernel that only allocates.

``python -I -B -m harness.kernels.echo FD PARAMS`` is started by the scorer (``calibrate``) as a
plain subprocess of its own: never sandboxed, never the candidate's interpreter. It serves on the
inherited socket ``FD`` exactly as the in-sandbox driver (:mod:`harness.inside.kernel_driver`)
does, but each call only returns zeros of the request's expected outputs, so its round trips and
CPU are the transport's and the driver's own, with no kernel in them.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable
from typing import Any

from harness.inside.kernel_driver import Driver
from harness.inside.kernel_wire import send


class EchoDriver(Driver):
    """A :class:`Driver` whose kernel is the trusted echo (zeros of the expected outputs)."""

    def kernel(self, fn: Callable[[Any], Any] | None, header: dict[str, Any], n: int) -> Callable[[Any], Any]:
        """Zeros of one call's expected output specs (``header["expect"]`` lists all ``n`` calls')."""
        t = self.torch
        specs = [(getattr(t, str(d)), tuple(int(x) for x in s)) for d, s in header["expect"]]
        per = len(specs) // max(1, n)

        def call(args: Any) -> Any:
            outs = [t.zeros(s, dtype=d, device=self.device) for d, s in specs[:per]]
            return outs[0] if len(outs) == 1 else outs

        return call


def bind_gpu(torch: Any, params: dict[str, Any]) -> int | None:
    """Make the worker slot's GPU (``params["cuda_index"]``) this process's current CUDA device.

    The echo inherits the scorer's environment (``CUDA_DEVICE_ORDER``, ``CUDA_VISIBLE_DEVICES``),
    so its CUDA numbering is the scorer's and the index is the one the scorer computes on: the
    echo's transfers run on the slot's GPU, beside its candidate, not on GPU 0. Returns the index
    (None on CPU).

    Raises:
        ValueError: The index is not one CUDA sees here.
    """
    if params.get("device") != "cuda":
        return None
    index = int(params.get("cuda_index", 0))
    count = int(torch.cuda.device_count())
    if not 0 <= index < count:
        raise ValueError(f"the slot's GPU is cuda:{index} but CUDA sees {count} GPU(s) here")
    torch.cuda.set_device(index)
    return index


def echo_main(fd: int, params: dict[str, Any]) -> None:
    """Serve on the inherited socket ``fd`` until ``stop`` or EOF (see the module docstring)."""
    import torch

    torch.set_num_threads(max(1, int(params.get("threads", 1))))
    index = bind_gpu(torch, params)  # before the driver touches CUDA
    sock = socket.socket(fileno=fd)
    driver = EchoDriver(".", params, torch)
    # The GPU it computes on, as CUDA's current device says (what the gpu twin checks).
    send(sock, {"type": "ready", "cuda_index": None if index is None else int(torch.cuda.current_device())})
    try:
        driver.serve(sock, None)
    except EOFError:
        pass


def main() -> None:
    """``echo FD PARAMS`` (see the module docstring)."""
    sys.dont_write_bytecode = True
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m harness.kernels.echo FD PARAMS")
    echo_main(int(sys.argv[1]), json.loads(sys.argv[2]))
    # Skip the interpreter's teardown: unloading torch costs ~0.7 s of CPU per session, spent
    # while the scorer waits for this process and beside the next session's timing.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
