"""Bounded decoding of candidate-made bytes: valid data round-trip, hostile data raise DecodeError only."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from harness.scoring.decode import ArraySpec, DecodeError, decode_json, decode_npy, decode_npz

DTYPES = st.sampled_from(["<f4", "<f8", "<i8", "<i4", "|u1"])


def _npy(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=arr.dtype.hasobject)  # pickled only to prove it is refused
    return buf.getvalue()


def _npy_header(header: str, data: bytes = b"") -> bytes:
    h = header.encode("latin1")
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data


@given(hnp.arrays(DTYPES, hnp.array_shapes(min_dims=0, max_dims=3, max_side=6)))
@settings(max_examples=60, deadline=None)
def test_npy_round_trip(arr: np.ndarray) -> None:
    spec = ArraySpec(arr.dtype.str, tuple(arr.shape), arr.nbytes)
    got = decode_npy(_npy(arr), "a.npy", spec)
    assert got.dtype == arr.dtype and got.shape == arr.shape
    np.testing.assert_array_equal(got, arr)
    free = ArraySpec(arr.dtype.str, tuple(None for _ in arr.shape), arr.nbytes)
    np.testing.assert_array_equal(decode_npy(_npy(arr.copy(order="F")), "a.npy", free), arr)


@given(st.binary(max_size=300))
@settings(max_examples=200, deadline=None)
def test_random_bytes_only_decode_error(data: bytes) -> None:
    for blob in (data, b"\x93NUMPY\x01\x00" + data):
        try:
            decode_npy(blob, "r.npy", ArraySpec("<f4", (None,), 1 << 20))
        except DecodeError:
            pass


@given(hnp.arrays("<f4", st.integers(1, 20)), st.data())
@settings(max_examples=60, deadline=None)
def test_truncated_or_mutated_npy_only_decode_error(arr: np.ndarray, data: st.DataObject) -> None:
    blob = bytearray(_npy(arr))
    cut = data.draw(st.integers(0, len(blob) - 1))
    for bad in (bytes(blob[:cut]), bytes(blob) + b"x"):
        with pytest.raises(DecodeError):
            decode_npy(bad, "t.npy", ArraySpec("<f4", (None,), 1 << 20))
    i = data.draw(st.integers(0, len(blob) - 1))
    blob[i] = data.draw(st.integers(0, 255))
    try:
        got = decode_npy(bytes(blob), "m.npy", ArraySpec("<f4", (None,), 1 << 20))
        assert got.dtype == np.float32 and got.ndim == 1
    except DecodeError:
        pass


@given(
    st.lists(st.integers(0, 1 << 70), min_size=0, max_size=4),
    st.sampled_from(["<f4", "|O", "<U8", "V8", ">f4"]),
)
@settings(max_examples=100, deadline=None)
def test_hostile_headers_rejected_before_allocation(shape: list[int], descr: str) -> None:
    header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {tuple(shape)!r}, }}"
    try:
        got = decode_npy(_npy_header(header), "h.npy", ArraySpec("<f4", (None,) * len(shape), 1 << 16))
        assert got.nbytes <= 1 << 16
    except DecodeError:
        pass


def test_huge_declared_shape_names_file_and_cap() -> None:
    blob = _npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }", b"\0" * 64)
    with pytest.raises(DecodeError, match=r"huge\.npy: .*over the 4096-byte cap"):
        decode_npy(blob, "huge.npy", ArraySpec("<f4", (None,), 4096))
    with pytest.raises(DecodeError, match="expected shape"):
        decode_npy(blob, "huge.npy", ArraySpec("<f4", (16,), 1 << 40))
    evil = _npy_header("{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 3000 + ")" * 3000 + "}")
    with pytest.raises(DecodeError):
        decode_npy(evil, "deep.npy", ArraySpec("<f4", (None,), 4096))
    with pytest.raises(DecodeError, match="not allowed"):
        decode_npy(_npy(np.array([{"a": 1}], dtype=object)), "o.npy", ArraySpec("<f4", (None,), 4096))


def _npz(members: dict[str, bytes], compress: bool = True) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as z:
        for k, v in members.items():
            z.writestr(k, v)
    return buf.getvalue()


def test_npz_round_trip_and_bomb() -> None:
    a, b = np.arange(6, dtype="<f4").reshape(2, 3), np.arange(4, dtype="<i8")
    specs = {"a": ArraySpec("<f4", (2, None), 1024), "b": ArraySpec("<i8", (None,), 1024)}
    for compress in (True, False):
        got = decode_npz(
            _npz({"a.npy": _npy(a), "b.npy": _npy(b)}, compress), "x.npz", specs, max_total_bytes=4096
        )
        np.testing.assert_array_equal(got["a"], a)
        np.testing.assert_array_equal(got["b"], b)
    with pytest.raises(DecodeError, match="members"):
        decode_npz(_npz({"a.npy": _npy(a)}), "x.npz", specs, max_total_bytes=4096)
    # 8 MiB of zeros inflated from ~8 KiB: refused by the declared size before inflating.
    bomb = _npz({"a.npy": _npy(np.zeros((2, 1 << 20), dtype="<f4")), "b.npy": _npy(b)})
    assert len(bomb) < 64 * 1024
    with pytest.raises(DecodeError, match="cap"):
        decode_npz(bomb, "bomb.npz", specs, max_total_bytes=1 << 16)
    big = {"a": ArraySpec("<f4", (2, None), 1024), "b": ArraySpec("<i8", (None,), 1024)}
    with pytest.raises(DecodeError, match="cap"):  # member's own cap, total cap generous
        decode_npz(bomb, "bomb.npz", big, max_total_bytes=1 << 30)


def test_npz_lying_declared_size_is_capped_while_inflating() -> None:
    blob = bytearray(_npz({"a.npy": _npy(np.zeros((2, 4096), dtype="<f4"))}))
    real = 2 * 4096 * 4 + 128
    lie = struct.pack("<I", 64)
    # Patch the uncompressed size in the local header (offset 22) and the central directory.
    for sig in (b"PK\x03\x04", b"PK\x01\x02"):
        at = blob.find(sig)
        off = 22 if sig == b"PK\x03\x04" else 24
        assert struct.unpack_from("<I", blob, at + off)[0] == real
        blob[at + off : at + off + 4] = lie
    with pytest.raises(DecodeError):
        decode_npz(
            bytes(blob), "lie.npz", {"a": ArraySpec("<f4", (2, None), 1 << 20)}, max_total_bytes=1 << 20
        )


@given(st.binary(max_size=400))
@settings(max_examples=150, deadline=None)
def test_npz_random_bytes_only_decode_error(data: bytes) -> None:
    for blob in (data, b"PK\x03\x04" + data):
        try:
            decode_npz(blob, "r.npz", {"a": ArraySpec("<f4", (None,), 1024)}, max_total_bytes=4096)
        except DecodeError:
            pass


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
    )
)
@settings(max_examples=100, deadline=None)
def test_json_round_trip(value: object) -> None:
    import json

    assert decode_json(json.dumps(value).encode(), "v.json", max_bytes=1 << 20) == value


def test_json_limits() -> None:
    deep = b"[" * 200_000 + b"]" * 200_000
    with pytest.raises(DecodeError, match="nested deeper than 64"):
        decode_json(deep, "deep.json", max_bytes=1 << 20)
    assert decode_json(b'{"a": "[[[[[[[[[[[[[[[[[[[[["}', "s.json", max_bytes=100, max_depth=2) == {
        "a": "[" * 21
    }
    with pytest.raises(DecodeError, match="over the 10-byte cap"):
        decode_json(b"[" + b"1," * 20 + b"1]", "big.json", max_bytes=10)
    for bad in (b"NaN", b"\xff", b"{", b"[1,]"):
        with pytest.raises(DecodeError):
            decode_json(bad, "bad.json", max_bytes=100)


@given(st.binary(max_size=200))
@settings(max_examples=150, deadline=None)
def test_json_random_bytes_only_decode_error(data: bytes) -> None:
    try:
        decode_json(data, "r.json", max_bytes=1 << 10, max_depth=8)
    except DecodeError:
        pass
