"""The in-sandbox driver's wire codec and checks, exercised in-process (and on a GPU when present)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import numpy as np
import pytest
import torch

from harness.kernels import driver as drv
from harness.kernels.session import _to_numpy


def test_wire_round_trip_keeps_structure_dtypes_and_bfloat16_bits() -> None:
    a, b = socket.socketpair()
    tree_in = [
        torch.arange(6, dtype=torch.float32).reshape(2, 3),
        {"w": torch.tensor([1.5, -2.25], dtype=torch.bfloat16), "k": torch.ones(2, dtype=torch.int64)},
        {"dim": 3, "name": "x"},
    ]
    arrays: dict[str, np.ndarray] = {}
    drv.send(a, {"args": drv.encode_tree(tree_in, torch, arrays)}, arrays)
    header, got = drv.recv(b)
    out = drv.decode_tree(header["args"], got, _to_numpy)
    np.testing.assert_array_equal(out[0].array, tree_in[0].numpy())
    assert out[1]["w"].dtype == "bfloat16"
    np.testing.assert_array_equal(out[1]["w"].array, np.array([1.5, -2.25], np.float32))
    assert out[1]["k"].dtype == "int64" and out[2] == {"dim": 3, "name": "x"}


def test_recv_enforces_caps_before_reading() -> None:
    a, b = socket.socketpair()
    drv.send(a, {"x": "y" * 100})
    with pytest.raises(ValueError, match="cap"):
        drv.recv(b, max_header=10)
    arrays = {"a0": np.zeros(1000)}
    drv.send(a, {"x": 1}, arrays)
    with pytest.raises(ValueError, match="cap"):
        drv.recv(b, max_payload=100)


def _driver(device: str = "cpu") -> drv.Driver:
    return drv.Driver(".", {"device": device, "entry": "f"}, torch)


def test_timed_call_on_cpu_reports_host_time_only() -> None:
    d = _driver()
    out, host, event = d.timed(lambda x: x * 2, torch.ones(3))
    assert event is None and host > 0 and torch.equal(out, torch.full((3,), 2.0))


@pytest.mark.parametrize(
    ("target", "name"),
    [
        (time, "perf_counter"),
        (time, "perf_counter_ns"),
        (torch.cuda, "synchronize"),
        (torch.cuda.Event, "elapsed_time"),
        (torch.cuda.Event, "record"),
    ],
)
def test_replaced_timing_primitives_are_caught(target: Any, name: str) -> None:
    d = _driver()
    orig = getattr(target, name)

    def patched(*a: Any, **k: Any) -> Any:
        return orig(*a, **k)

    try:
        with pytest.raises(drv.RuleBroken, match="timing"):
            d.timed(lambda x: setattr(target, name, patched) or x + 1, torch.ones(1))
    finally:
        setattr(target, name, orig)
    d.check_integrity()  # restored: clean again


def test_threads_left_running_are_caught() -> None:
    d = _driver()
    stop = threading.Event()
    try:
        with pytest.raises(drv.RuleBroken, match="threads"):
            d.timed(lambda x: threading.Thread(target=stop.wait, daemon=True).start() or x, torch.ones(1))
    finally:
        stop.set()


def test_output_must_be_a_plain_tensor() -> None:
    class Sub(torch.Tensor):
        pass

    d = _driver()
    d.check_output((torch.ones(1), torch.zeros(2)))
    for bad in (torch.ones(1).as_subclass(Sub), np.ones(1), [torch.ones(1), 3.0]):
        with pytest.raises(drv.RuleBroken, match="output"):
            d.check_output(bad)


@pytest.mark.gpu
def test_cuda_timing_uses_events_within_the_host_bracket() -> None:
    if not torch.cuda.is_available():
        pytest.fail("gpu-marked test needs a CUDA GPU")
    d = drv.Driver(".", {"device": "cuda", "entry": "f", "l2_flush_bytes": 64 << 20}, torch)
    x = torch.randn(2048, 2048, device="cuda")
    for _ in range(3):
        out, host, event = d.timed(lambda a: a @ a, x)
        assert event is not None and 0 < event <= host
        assert out.device.type == "cuda"
    with pytest.raises(drv.RuleBroken, match="output"):
        d.check_output(torch.ones(1))  # a CPU tensor from a CUDA evaluation


def test_outputs_tagged_as_ipc_handles_are_refused_by_the_trusted_side() -> None:
    # The candidate's replies are decoded with _to_numpy: an IPC-tagged array is never unpickled.
    with pytest.raises(ValueError):
        _to_numpy(np.frombuffer(b"\x80\x04N.", dtype=np.uint8), "ipc:float32")


_CHILD = """
import sys, numpy as np, torch
from harness.kernels import driver as drv
d = drv.Driver(".", {"device": "cuda", "entry": "f"}, torch)
t = d.leaf(np.frombuffer(sys.stdin.buffer.read(), dtype=np.uint8), "ipc:float32")
t.add_(1.0)  # writes the driver's private copy only
print(float(t.sum()))
"""


@pytest.mark.gpu
def test_cuda_inputs_travel_by_ipc_handle_into_a_private_copy() -> None:
    import subprocess
    import sys

    from harness.kernels.session import _IpcTransport

    if not torch.cuda.is_available():
        pytest.fail("gpu-marked test needs a CUDA GPU")
    x = torch.arange(1024, dtype=torch.float32, device="cuda")
    shared = _IpcTransport(torch)
    blob = shared.handle(x)
    out = subprocess.run([sys.executable, "-c", _CHILD], input=blob, capture_output=True, check=True)
    assert float(out.stdout) == pytest.approx(float(x.sum()) + 1024)
    shared.release()
    assert float(x.sum()) == pytest.approx(1023 * 1024 / 2)  # the scorer's original is untouched
