"""GPU twins of the kernel red team (``gpu``-marked: skipped without CUDA, run by ``bench doctor --gpu``).

The trusted session drives the real driver as a plain subprocess on ``cuda`` (the sandbox is not
what is tested here): work hidden on a side stream after the call returns, batched or not, and
the trusted process's GPU memory over many calls. Written against torch's documented CUDA API
(``torch.cuda.Stream``, ``torch.cuda.stream``, ``memory_allocated``, ``mem_get_info``); not run on
the CPU-only machine these tests were written on.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.evaluation.errors import CandidateInvalid
from harness.kernels.session import DriverParams, KernelSession

from .test_kernel_session import PlainRuntime

pytestmark = pytest.mark.gpu

# Returns x * 2 at once; ~50 large matmuls run on a side stream the current-stream events miss.
SIDE_STREAM = """
import torch
side = torch.cuda.Stream()
def custom_kernel(data):
    x = data[0]
    out = x * 2.0
    big = torch.ones(4096, 4096, device=x.device)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = big
        for _ in range(50):
            y = (y @ big) / 4096.0
    return out
"""

HONEST = """
def custom_kernel(data):
    return data[0] * 2.0
"""


def _session(tmp_path: Path, source: str) -> KernelSession:
    params = DriverParams(entry="custom_kernel", device="cuda")
    return KernelSession(PlainRuntime(tmp_path, source), params)  # type: ignore[arg-type]


@pytest.mark.parametrize("reps", [1, 4])
def test_side_stream_work_counts_and_under_reporting_is_invalid(tmp_path: Path, reps: int) -> None:
    xs = [[torch.randn(256, 256)] for _ in range(reps)]
    spec = [[("float32", (256, 256))]] * reps
    with _session(tmp_path, SIDE_STREAM) as s:
        s.call_many(xs, "warm-up", spec, timed=False)

        def more() -> float:
            outs, t = s.call_many(xs, "call", spec)
            for (x,), o in zip(xs, outs, strict=True):
                torch.testing.assert_close(torch.from_numpy(o.array), x * 2.0)  # complete on reply
            # The device-wide synchronize puts the side stream in the host time, not in the events.
            assert t.host_seconds > 5 * t.seconds * t.reps
            return t.seconds

        times = [more() for _ in range(3)]
        with pytest.raises(CandidateInvalid, match="rule 'timing'"):
            s.close_case(times, more, "case")


def test_inputs_and_outputs_leak_no_gpu_memory_over_100_calls(tmp_path: Path) -> None:
    torch.cuda.init()
    before = torch.cuda.memory_allocated()
    x = [torch.randn(1024, 1024)]  # 4 MiB in, 4 MiB out per call
    spec = [("float32", (1024, 1024))]
    with _session(tmp_path, HONEST) as s:
        for _ in range(10):
            s.call(x, "warm-up", spec, timed=False)
        torch.cuda.synchronize()
        free0, _ = torch.cuda.mem_get_info()  # device-wide: the driver's allocations included
        for _ in range(100):
            s.call(x, "call", spec, timed=False)
        free1, _ = torch.cuda.mem_get_info()
    # The trusted process holds no device memory for a call (host bytes only, no CUDA IPC), and
    # the driver's caching allocator reuses its blocks: 100 calls of 4 MiB grow nothing.
    assert torch.cuda.memory_allocated() == before
    assert free0 - free1 <= 64 << 20, (free0, free1)
