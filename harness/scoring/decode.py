"""Bounded decoders for every byte stream a candidate made and the trusted side reads.

A hostile candidate controls these bytes completely, so nothing here trusts a declared size before
checking it against a limit the caller chose: a ``.npy`` header is parsed by hand (no
``numpy.load``, no pickle, no object dtype) and its shape x itemsize is compared with the expected
spec or a byte cap *before* anything is allocated; a ``.npz`` member's declared uncompressed size is
checked, and then it is inflated with a running cap (the declared size is the candidate's word);
JSON gets a byte cap and a nesting-depth limit checked on the raw text before ``json.loads`` (whose
recursion would otherwise overflow). Every failure is a :class:`DecodeError` naming the file and the
limit; callers turn it into ``CandidateError`` / ``CandidateInvalid``, never an infrastructure error.
"""

from __future__ import annotations

import ast
import io
import json
import math
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

NPY_MAGIC = b"\x93NUMPY"
MAX_NPY_HEADER = 4096  # numpy itself writes 64-byte-aligned headers far below this
MAX_NPZ_MEMBERS = 64
MAX_DIM = 1 << 40  # any one dimension (numpy refuses dims past intp even in zero-size arrays)
DEFAULT_JSON_DEPTH = 64
# Real little-endian numeric dtypes only: no object (pickle), no strings, no structured records.
ALLOWED_DTYPES = frozenset(
    f"<{k}{n}" for k, sizes in {"f": (2, 4, 8), "i": (1, 2, 4, 8), "u": (1, 2, 4, 8)}.items() for n in sizes
) | frozenset({"|b1", "|i1", "|u1"})


class DecodeError(ValueError):
    """Candidate-made bytes broke a format rule or a limit; the message names the file and the limit."""


@dataclass(frozen=True)
class ArraySpec:
    """What an array read from a candidate must look like, checked before allocation."""

    dtype: str
    """Exact numpy dtype string expected (e.g. ``"<f4"`` or ``"float32"``)."""
    shape: tuple[int | None, ...]
    """Expected shape; ``None`` marks a free dimension (bounded by ``max_bytes``)."""
    max_bytes: int
    """Cap on the decoded array's data size in bytes."""


def _depth_ok(text: bytes, max_depth: int) -> bool:
    """Whether the nesting of ``[``/``{`` outside strings stays within ``max_depth`` (linear scan)."""
    depth, in_str, esc = 0, False, False
    for b in text:
        if in_str:
            if esc:
                esc = False
            elif b == 0x5C:  # backslash
                esc = True
            elif b == 0x22:
                in_str = False
        elif b == 0x22:
            in_str = True
        elif b in (0x5B, 0x7B):
            depth += 1
            if depth > max_depth:
                return False
        elif b in (0x5D, 0x7D):
            depth -= 1
    return True


def decode_json(data: bytes, name: str, *, max_bytes: int, max_depth: int = DEFAULT_JSON_DEPTH) -> Any:
    """Parse candidate-made JSON under a size cap and a nesting-depth limit.

    Args:
        data: The raw bytes.
        name: What they are (file name), for the message.
        max_bytes: Size cap.
        max_depth: Deepest allowed nesting of arrays and objects.

    Returns:
        The parsed value (NaN / Infinity literals are rejected).

    Raises:
        DecodeError: Over a limit, not UTF-8, or not valid JSON.
    """
    if len(data) > max_bytes:
        raise DecodeError(f"{name}: {len(data)} bytes, over the {max_bytes}-byte cap")
    if not _depth_ok(data, max_depth):
        raise DecodeError(f"{name}: JSON nested deeper than {max_depth} levels")

    def _no_constant(c: str) -> Any:
        raise ValueError(f"non-finite constant {c}")

    try:
        return json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise DecodeError(f"{name}: not valid JSON ({str(e)[:200]})") from None


def _npy_header(
    f: io.BufferedIOBase | io.BytesIO | Any, name: str
) -> tuple[np.dtype[Any], tuple[int, ...], bool]:
    """Read and check a ``.npy`` header from ``f``; return dtype, shape and Fortran order."""
    head = f.read(len(NPY_MAGIC) + 2)
    if len(head) < len(NPY_MAGIC) + 2 or head[: len(NPY_MAGIC)] != NPY_MAGIC:
        raise DecodeError(f"{name}: not a .npy array (bad magic)")
    major = head[len(NPY_MAGIC)]
    if major not in (1, 2, 3):
        raise DecodeError(f"{name}: unsupported .npy format version {major}")
    width = 2 if major == 1 else 4
    raw_len = f.read(width)
    if len(raw_len) != width:
        raise DecodeError(f"{name}: truncated .npy header")
    hlen = int.from_bytes(raw_len, "little")
    if not 0 <= hlen <= MAX_NPY_HEADER:
        raise DecodeError(f"{name}: .npy header length {hlen} outside [0, {MAX_NPY_HEADER}]")
    text = f.read(hlen)
    if len(text) != hlen:
        raise DecodeError(f"{name}: truncated .npy header")
    try:
        # literal_eval parses literals only (no calls); the length cap bounds its recursion.
        header = ast.literal_eval(text.decode("latin1"))
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError) as e:
        raise DecodeError(f"{name}: unreadable .npy header ({type(e).__name__})") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise DecodeError(f"{name}: .npy header must have exactly descr, fortran_order and shape")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not isinstance(descr, str) or descr not in ALLOWED_DTYPES:
        raise DecodeError(f"{name}: dtype {descr!r} is not allowed (real little-endian numbers only)")
    if not isinstance(fortran, bool):
        raise DecodeError(f"{name}: fortran_order must be a bool")
    if (
        not isinstance(shape, tuple)
        or len(shape) > 32
        or any(type(d) is not int or not 0 <= d <= MAX_DIM for d in shape)
    ):
        raise DecodeError(f"{name}: bad .npy shape {str(shape)[:100]}")
    return np.dtype(descr), shape, fortran


def _check_spec(name: str, dtype: np.dtype[Any], shape: tuple[int, ...], spec: ArraySpec) -> int:
    """Check dtype, shape and byte size against ``spec`` (exact integers); return the data size."""
    if dtype != np.dtype(spec.dtype):
        raise DecodeError(f"{name}: expected dtype {np.dtype(spec.dtype)}, got {dtype}")
    if len(shape) != len(spec.shape) or any(
        want is not None and got != want for got, want in zip(shape, spec.shape, strict=True)
    ):
        raise DecodeError(f"{name}: expected shape {spec.shape}, got {shape}")
    nbytes = math.prod(shape) * dtype.itemsize  # Python ints: no overflow
    if nbytes > spec.max_bytes:
        raise DecodeError(f"{name}: {shape} x {dtype} is {nbytes} bytes, over the {spec.max_bytes}-byte cap")
    return nbytes


def _npy_from(f: Any, name: str, spec: ArraySpec) -> np.ndarray:
    dtype, shape, fortran = _npy_header(f, name)
    nbytes = _check_spec(name, dtype, shape, spec)
    data = f.read(nbytes)
    if len(data) != nbytes:
        raise DecodeError(f"{name}: truncated .npy data ({len(data)} of {nbytes} bytes)")
    if f.read(1):
        raise DecodeError(f"{name}: trailing bytes after the .npy data")
    arr = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    return arr.astype(dtype.newbyteorder("="), order="C", copy=True)  # writable, native, C order


def read_npy(f: Any, name: str, spec: ArraySpec) -> np.ndarray:
    """Decode a ``.npy`` stream from a binary file object, reading no data before the header passed.

    Only the header (at most ``MAX_NPY_HEADER`` bytes) and then exactly the array's declared size
    are read, so memory stays within the spec's cap whatever the file's size.

    Raises:
        DecodeError: As :func:`decode_npy`.
    """
    return _npy_from(f, name, spec)


def decode_npy(data: bytes, name: str, spec: ArraySpec) -> np.ndarray:
    """Decode a candidate-made ``.npy`` file, checking its declared dtype, shape and size first.

    Args:
        data: The file's bytes (already read under a file-size cap).
        name: File name, for messages.
        spec: Expected dtype, shape and byte cap.

    Returns:
        A C-contiguous array in native byte order.

    Raises:
        DecodeError: Malformed header, disallowed dtype, another shape, over the cap, or truncated.
    """
    return _npy_from(io.BytesIO(data), name, spec)


class _CappedReader(io.RawIOBase):
    """Wraps a zip member stream; fails once more than ``cap`` decompressed bytes come out."""

    def __init__(self, inner: Any, cap: int, name: str) -> None:
        self.inner, self.cap, self.name, self.seen = inner, cap, name, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        want = self.cap + 1 - self.seen if n < 0 else min(n, self.cap + 1 - self.seen)
        chunk = self.inner.read(max(want, 0))
        self.seen += len(chunk)
        if self.seen > self.cap:
            raise DecodeError(f"{self.name}: inflates past its {self.cap}-byte cap")
        return bytes(chunk)


def decode_npz(
    data: bytes, name: str, specs: dict[str, ArraySpec], *, max_total_bytes: int
) -> dict[str, np.ndarray]:
    """Decode a candidate-made ``.npz`` archive holding exactly the members of ``specs``.

    Each member's declared uncompressed size and the total are checked first; each is then inflated
    through a running cap (declared sizes are the candidate's word), and its ``.npy`` header checked
    against its spec before its data are read.

    Args:
        data: The archive's bytes (already read under a file-size cap).
        name: File name, for messages.
        specs: Expected member names (without ``.npy``) and their specs.
        max_total_bytes: Cap on the sum of the members' uncompressed sizes.

    Returns:
        The arrays by member name.

    Raises:
        DecodeError: Not a zip, other members, a member over its cap, or a malformed member.
    """
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, struct.error) as e:
        raise DecodeError(f"{name}: not a valid .npz archive ({str(e)[:200]})") from None
    with zf:
        if len(infos) > MAX_NPZ_MEMBERS:
            raise DecodeError(f"{name}: {len(infos)} members, over the limit of {MAX_NPZ_MEMBERS}")
        members = [i.filename for i in infos]
        want = sorted(f"{k}.npy" for k in specs)
        if sorted(members) != want:
            raise DecodeError(f"{name}: members {sorted(members)[:10]}, expected {want}")
        total = sum(i.file_size for i in infos)
        if total > max_total_bytes:
            raise DecodeError(
                f"{name}: declares {total} uncompressed bytes, over the {max_total_bytes}-byte cap"
            )
        out: dict[str, np.ndarray] = {}
        for info in infos:
            key = info.filename[: -len(".npy")]
            spec = specs[key]
            cap = min(spec.max_bytes + MAX_NPY_HEADER + 16, info.file_size)
            member = f"{name}:{info.filename}"
            try:
                with zf.open(info) as raw:
                    out[key] = _npy_from(_CappedReader(raw, cap, member), member, spec)
            except DecodeError:
                raise
            except (
                zipfile.BadZipFile,
                zlib.error,
                OSError,
                ValueError,
                EOFError,
                NotImplementedError,
                RuntimeError,
                struct.error,
            ) as e:
                raise DecodeError(f"{member}: cannot be inflated ({str(e)[:200]})") from None
        return out
