"""The sandbox wire format: exact round trips, and the decoder rejects anything else with WireError."""

from __future__ import annotations

import json
import math
import os
import socket
import struct
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.inside import wire
from harness.inside.wire import WireError

ALLOWED = sorted(wire.ALLOWED_DTYPES)
_SCALE = float(os.environ.get("EVOBENCH_WIRE_FUZZ_SCALE", "1"))  # e.g. 20 for a long fuzzing session
FUZZ = settings(
    max_examples=int(300 * _SCALE), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
ROUND_TRIP = settings(
    max_examples=int(150 * _SCALE), deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)


# -- helpers -------------------------------------------------------------------------------------
def frame(header: Any, *buffers: bytes) -> bytes:
    """A payload with a hand-made header (dict, or raw bytes) and raw buffers."""
    h = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("!I", len(h)) + h + b"".join(buffers)


def nd(idx: Any = 0, dtype: Any = "<f8", shape: Any = (1,), torch_: Any = False) -> dict[str, Any]:
    """An array node of a header tree."""
    return {
        "__nd__": idx,
        "dtype": dtype,
        "shape": list(shape) if isinstance(shape, tuple) else shape,
        "torch": torch_,
    }


def result_msg(tree: Any, sizes: list[Any], *buffers: bytes) -> bytes:
    return frame({"tree": tree, "sizes": sizes}, *buffers)


def decode_or_wire_error(payload: bytes, **kw: Any) -> Any:
    """Decode; a ``WireError`` is fine, any other exception fails the test (it propagates)."""
    try:
        return wire.decode(payload, **kw)
    except WireError:
        return None


def same(a: Any, b: Any) -> bool:
    """Exact structural equality: container types, dtypes, shapes, bits of floats and buffers."""
    if isinstance(a, torch.Tensor):
        if not isinstance(b, torch.Tensor):
            return False
        expected = a.detach().cpu()
        if expected.dtype == torch.bfloat16:
            expected = expected.float()
        return (
            b.dtype == expected.dtype
            and tuple(b.shape) == tuple(expected.shape)
            and b.contiguous().numpy().tobytes() == expected.contiguous().numpy().tobytes()
        )
    if isinstance(a, np.ndarray):
        return (
            type(b) is np.ndarray
            and b.dtype == a.dtype
            and b.shape == a.shape
            and np.ascontiguousarray(a).tobytes() == b.tobytes()
        )
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("!d", a) == struct.pack("!d", b) or (math.isnan(a) and math.isnan(b))
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


# -- strategies ----------------------------------------------------------------------------------
scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)

numpy_arrays = hnp.arrays(
    dtype=st.sampled_from(ALLOWED).map(np.dtype),
    shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5),
)


@st.composite
def strided(draw: st.DrawFn) -> np.ndarray:
    """Non-contiguous views (transposes, steps) of arrays."""
    a = draw(
        hnp.arrays(dtype=st.sampled_from(ALLOWED).map(np.dtype), shape=st.tuples(*[st.integers(1, 6)] * 2))
    )
    return a.T if draw(st.booleans()) else a[::2, ::-1]


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    a = draw(
        hnp.arrays(
            dtype=st.sampled_from(ALLOWED).map(np.dtype),
            shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
        )
    )
    t = torch.from_numpy(a.copy())
    kind = draw(st.sampled_from(["plain", "bfloat16", "grad", "transposed"]))
    if kind == "bfloat16" and t.is_floating_point():
        t = t.to(torch.bfloat16)
    elif kind == "grad" and t.is_floating_point():
        t = t.clone().requires_grad_(True) * 1
    elif kind == "transposed" and t.dim() >= 2:
        t = t.transpose(0, 1)
    return t


leaves = scalars | numpy_arrays | strided() | tensors()
values = st.recursive(
    leaves,
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)


# -- round trips ---------------------------------------------------------------------------------
@ROUND_TRIP
@given(values)
def test_round_trip(value: Any) -> None:
    assert same(value, wire.decode(wire.encode(value)))


@ROUND_TRIP
@given(numpy_arrays | strided())
def test_round_trip_arrays(arr: np.ndarray) -> None:
    out = wire.decode(wire.encode(arr))
    assert same(arr, out)
    assert out.flags.writeable and out.flags.c_contiguous  # a private copy, not a view of the payload


@ROUND_TRIP
@given(tensors())
def test_round_trip_tensors(t: torch.Tensor) -> None:
    payload = wire.encode({"t": t})
    assert same(t, wire.decode(payload)["t"])
    as_np = wire.decode(payload, as_torch=False)["t"]
    assert type(as_np) is np.ndarray and as_np.shape == tuple(t.shape)


def test_numpy_scalars_become_python_numbers() -> None:
    out = wire.decode(wire.encode([np.float32(1.5), np.int64(-3), np.bool_(True), np.uint8(7)]))
    assert out == [1.5, -3, True, 7]
    assert [type(x) for x in out] == [float, int, bool, int]


def test_special_floats_round_trip() -> None:
    out = wire.decode(wire.encode({"nan": float("nan"), "inf": float("inf"), "neg": -0.0}))
    assert math.isnan(out["nan"]) and out["inf"] == math.inf and math.copysign(1, out["neg"]) == -1


@ROUND_TRIP
@given(values)
def test_socket_round_trip(value: Any) -> None:
    a, b = socket.socketpair()
    with a, b:
        a.settimeout(5)
        b.settimeout(5)
        wire.send_message(a, value)
        assert same(value, wire.recv_message(b))


# -- encoder rejections ---------------------------------------------------------------------------
def _nested(depth: int) -> Any:
    x: Any = 0
    for _ in range(depth):
        x = [x]
    return x


def _cyclic() -> list[Any]:
    x: list[Any] = []
    x.append(x)
    return x


@pytest.mark.parametrize(
    "value",
    [
        np.array([object()], dtype=object),
        np.array([1 + 2j]),
        np.array([1 + 2j], dtype=np.complex64),
        np.array(["abc"]),
        np.array([b"abc"]),
        np.array(["2020-01-01"], dtype="datetime64[D]"),
        np.array([1, 2], dtype=">i4"),
        np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8")]),
        torch.tensor([1 + 2j]),
        1 + 2j,
        np.complex128(1 + 1j),
        b"bytes",
        {1: "int key"},
        {("a",): 1},
        {1, 2},
        lambda: 1,
        object(),
        _nested(wire.MAX_DEPTH + 5),
        _cyclic(),
        [0] * (wire.MAX_NODES + 1),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, np.ndarray) else str(v.dtype),
)
def test_encode_rejects(value: Any) -> None:
    with pytest.raises(WireError):
        wire.encode(value)


def test_encode_rejects_unencodable_inside_containers() -> None:
    for value in ({"ok": 1, "bad": lambda: 0}, [1, (2, {3})], ({"x": np.array([1j])},)):
        with pytest.raises(WireError):
            wire.encode(value)


# -- decoder rejections ---------------------------------------------------------------------------
def _valid_payload() -> bytes:
    return wire.encode({"a": np.arange(6, dtype=np.int32).reshape(2, 3), "b": [1.5, "x"], "c": torch.ones(3)})


def test_truncated_payloads() -> None:
    payload = _valid_payload()
    for n in range(len(payload)):
        with pytest.raises(WireError):
            wire.decode(payload[:n])


def test_trailing_bytes() -> None:
    payload = _valid_payload()
    for extra in (b"\0", b"x" * 100):
        with pytest.raises(WireError):
            wire.decode(payload + extra)


def test_size_mismatch() -> None:
    buf = np.arange(4, dtype="<f8").tobytes()
    bad = [
        result_msg(nd(0, "<f8", (4,)), [len(buf) - 8], buf[:-8]),  # table agrees with length, not shape
        result_msg(nd(0, "<f8", (5,)), [len(buf)], buf),
        result_msg(nd(0, "<f8", (2, 3)), [len(buf)], buf),
        result_msg(nd(0, "<f4", (4,)), [len(buf)], buf),
        result_msg(nd(0, "<f8", (4,)), [len(buf) + 1], buf),  # table larger than the message
        result_msg(nd(0, "<f8", (4,)), [len(buf)], buf, b"\0"),  # message larger than the table
        result_msg(nd(0, "<f8", (4,)), [], buf),
    ]
    for payload in bad:
        with pytest.raises(WireError):
            wire.decode(payload)


@pytest.mark.parametrize(
    "dtype",
    [
        "|O",
        "<c16",
        "<c8",
        "<M8[D]",
        "<m8[s]",
        "<U3",
        "|S3",
        "|V8",
        ">f8",
        ">i4",
        "f8",
        "float64",
        "",
        8,
        None,
        [],
        {},
        ["<f8"],
    ],
)
def test_forged_dtype(dtype: Any) -> None:
    with pytest.raises(WireError):
        wire.decode(result_msg(nd(0, dtype, (1,)), [8], b"\0" * 8))


@pytest.mark.parametrize(
    "shape",
    [
        [-1],
        [1.0],
        ["1"],
        [None],
        "1",
        None,
        {"a": 1},
        [[1]],
        [10**30],
        [2**63],
        [2**62, 4],  # the product wraps to 0 in int64
        [2**32, 2**32],
        [2**31] * 3,
        [1] * 70,  # more dimensions than numpy supports
        [0, 2**70],  # zero elements, but a dimension numpy refuses
        [0, 2**62],  # zero elements, "array is too big"
    ],
)
def test_forged_shape(shape: Any) -> None:
    for size in (0, 1, 8):
        with pytest.raises(WireError):
            wire.decode(result_msg(nd(0, "|u1", shape), [size], b"\0" * size))


def test_bool_dimensions_never_crash() -> None:
    # JSON booleans are ints to Python: accepting them as 0 / 1 is fine, crashing is not.
    for size in (0, 1, 2):
        decode_or_wire_error(result_msg(nd(0, "|u1", [True, True]), [size], b"\0" * size))
        decode_or_wire_error(result_msg(nd(True, "|u1", [False]), [size, 0], b"\0" * size))


@pytest.mark.parametrize(
    "header",
    [
        b"",
        b"{",
        b"\xff\xfe",
        b"null",
        b"[]",
        b"7",
        b'"tree"',
        b'{"tree": 1}',
        b'{"sizes": []}',
        b'{"tree": 1, "sizes": 3}',
        b'{"tree": 1, "sizes": [-1]}',
        b'{"tree": 1, "sizes": [1.5]}',
        b'{"tree": 1, "sizes": ["1"]}',
        b'{"tree": 1, "sizes": {"0": 1}}',
        b'{"tree": {}, "sizes": []}',
        b'{"tree": {"a": 1}, "sizes": []}',
        b'{"tree": {"__tuple__": "abc"}, "sizes": []}',
        b'{"tree": {"__tuple__": [], "x": 1}, "sizes": []}',
        b'{"tree": {"__dict__": [1, 2]}, "sizes": []}',
        b'{"tree": {"__dict__": {}, "__tuple__": []}, "sizes": []}',
        b'{"tree": {"__nd__": 0, "dtype": "<f8", "shape": []}, "sizes": [8]}',
        b'{"tree": {"__nd__": 1, "dtype": "<f8", "shape": [], "torch": false}, "sizes": [8]}',
        b'{"tree": {"__nd__": -1, "dtype": "<f8", "shape": [], "torch": false}, "sizes": [8]}',
        b'{"tree": {"__nd__": "0", "dtype": "<f8", "shape": [], "torch": false}, "sizes": [8]}',
        b'{"tree": {"__nd__": null, "dtype": "<f8", "shape": [], "torch": false}, "sizes": [8]}',
        b'{"tree": {"__nd__": 0.0, "dtype": "<f8", "shape": [], "torch": false}, "sizes": [8]}',
    ],
)
def test_forged_header(header: bytes) -> None:
    buffers = b"\0" * 8 if b'"sizes": [8]' in header else b""
    with pytest.raises(WireError):
        wire.decode(frame(header, buffers))


def test_header_length_lies() -> None:
    body = json.dumps({"tree": 1, "sizes": []}).encode()
    for hlen in (0, 1, len(body) - 1, len(body) + 1, 2**31, 2**32 - 1):
        with pytest.raises(WireError):
            wire.decode(struct.pack("!I", hlen) + body)


def test_absurd_nesting() -> None:
    # Deeper than MAX_DEPTH but parseable JSON, in every container kind.
    for depth in (wire.MAX_DEPTH + 2, 200):
        lists = "[" * depth + "]" * depth
        tuples = '{"__tuple__": [' * depth + "]}" * depth
        dicts = '{"__dict__": {"k": ' * depth + "1" + "}}" * depth
        for tree in (lists, tuples, dicts):
            with pytest.raises(WireError):
                wire.decode(frame(('{"tree": ' + tree + ', "sizes": []}').encode()))
    # So deep that the JSON parser itself gives up.
    for depth in (10_000, 200_000):
        with pytest.raises(WireError):
            wire.decode(frame(b'{"tree": ' + b"[" * depth + b"]" * depth + b', "sizes": []}'))


def test_too_many_nodes() -> None:
    with pytest.raises(WireError):
        wire.decode(frame({"tree": [0] * (wire.MAX_NODES + 1), "sizes": []}))


def test_recv_message_rejects_oversized_frame_without_reading_it() -> None:
    a, b = socket.socketpair()
    with a, b:
        b.settimeout(2)
        a.sendall(struct.pack("!Q", wire.MAX_MESSAGE_BYTES + 1))
        with pytest.raises(WireError):
            wire.recv_message(b)


def test_recv_message_eof_and_timeout() -> None:
    a, b = socket.socketpair()
    with b:
        b.settimeout(2)
        a.sendall(struct.pack("!Q", 100) + b"\0" * 10)
        a.close()
        with pytest.raises(EOFError):
            wire.recv_message(b)
    a, b = socket.socketpair()
    with a, b:
        b.settimeout(0.2)
        a.sendall(struct.pack("!Q", 100))
        with pytest.raises(TimeoutError):
            wire.recv_message(b)


# -- fuzzing: the decoder raises WireError and nothing else ---------------------------------------
@FUZZ
@given(st.binary(max_size=512))
def test_fuzz_arbitrary_bytes(data: bytes) -> None:
    decode_or_wire_error(data)
    decode_or_wire_error(data, as_torch=False)


@FUZZ
@given(st.binary(max_size=256))
def test_fuzz_bytes_after_plausible_header_length(data: bytes) -> None:
    for hlen in (len(data), max(len(data) - 8, 0)):
        decode_or_wire_error(struct.pack("!I", hlen) + data)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=6)
    | st.sampled_from(["__nd__", "__tuple__", "__dict__", "<f8", "|O", "|u1", "<c16"]),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["__nd__", "dtype", "shape", "torch", "__tuple__", "__dict__", "k"]),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@st.composite
def array_nodes(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "__nd__": draw(st.integers(-2, 3) | json_values),
        "dtype": draw(st.sampled_from([*ALLOWED, "|O", "<c16", ">f8", "<U1"]) | json_values),
        "shape": draw(st.lists(st.integers(-2, 2**64), max_size=5) | json_values),
        "torch": draw(st.booleans() | json_values),
    }


trees = st.recursive(
    json_values | array_nodes(),
    lambda children: (
        st.lists(children, max_size=3)
        | st.lists(children, max_size=3).map(lambda xs: {"__tuple__": xs})
        | st.dictionaries(st.text(max_size=4), children, max_size=3).map(lambda d: {"__dict__": d})
    ),
    max_leaves=10,
)


@FUZZ
@given(trees, st.lists(st.integers(-1, 64) | json_values, max_size=4), st.binary(max_size=256))
def test_fuzz_structured_headers(tree: Any, sizes: Any, buffers: bytes) -> None:
    # Sizes that add up to the buffer length are the interesting case: they pass the table check.
    if isinstance(sizes, list) and sizes and all(type(s) is int and s >= 0 for s in sizes[:-1]):
        rest = len(buffers) - sum(sizes[:-1])
        assume(rest >= 0)
        sizes = [*sizes[:-1], rest]
    try:
        payload = frame({"tree": tree, "sizes": sizes}, buffers)
    except (ValueError, TypeError):
        assume(False)
    decode_or_wire_error(payload)
    decode_or_wire_error(payload, as_torch=False)


@FUZZ
@given(values, st.data())
def test_fuzz_mutated_valid_payloads(value: Any, data: st.DataObject) -> None:
    payload = bytearray(wire.encode(value))
    for _ in range(data.draw(st.integers(1, 4))):
        op = data.draw(st.sampled_from(["flip", "cut", "insert"]))
        pos = data.draw(st.integers(0, max(len(payload) - 1, 0)))
        if op == "flip" and payload:
            payload[pos] ^= data.draw(st.integers(1, 255))
        elif op == "cut":
            del payload[pos : pos + data.draw(st.integers(1, 16))]
        else:
            payload[pos:pos] = data.draw(st.binary(min_size=1, max_size=8))
    decode_or_wire_error(bytes(payload))


def test_recv_message_refuses_a_message_over_max_bytes_before_reading_it() -> None:
    """Issue 20: the trusted side caps a candidate's reply before allocating for it."""
    a, b = socket.socketpair()
    with a, b:
        b.settimeout(5)
        wire.send_message(a, {"x": np.zeros(1000)})
        with pytest.raises(wire.WireError, match="exceeds 4096"):
            wire.recv_message(b, max_bytes=4096)
    a, b = socket.socketpair()
    with a, b:
        b.settimeout(5)
        wire.send_message(a, {"x": np.zeros(10)})
        got = wire.recv_message(b, max_bytes=4096)  # one that fits decodes as before
        assert np.array_equal(got["x"], np.zeros(10))
