"""Safe message format between the trusted scorer and the sandboxed candidate.

No pickle: a hostile candidate must not be able to run code in the trusted process by what
it returns. A message is a JSON header plus raw array buffers; arrays are rebuilt with
``numpy.frombuffer`` from a whitelist of dtypes after checking sizes. This module is also
loaded inside the sandbox by :mod:`.serve` and so imports only the standard library and numpy
(torch lazily, when present).
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import time
from typing import Any

import numpy as np

MAX_MESSAGE_BYTES = 512 * 1024 * 1024
MAX_DIM = 2**40
"""Largest accepted array dimension (a zero-size array may still carry huge dimensions)."""
MAX_DEPTH = 32
MAX_NODES = 1_000_000
ALLOWED_DTYPES = frozenset(
    np.dtype(t).str
    for t in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
    )
)
_LEN = struct.Struct("!Q")
_HDR = struct.Struct("!I")


class WireError(ValueError):
    """A message is malformed, too large, or holds a value the format does not allow."""


def _torch(load: bool = False) -> Any:
    """The torch module if already imported (or, with ``load``, if importable); else None."""
    if "torch" in sys.modules or load:
        try:
            import torch
        except ImportError:  # pragma: no cover - torch is a core dependency of the project
            return None
        return torch
    return None


def encode(obj: Any) -> bytes:
    """Encode a value tree (None, bool, int, float, str, list, tuple, dict, arrays, tensors).

    Raises:
        WireError: If the tree holds an unsupported type, a non-str dict key or is too large.
    """
    buffers: list[bytes] = []
    count = [0]
    torch = _torch()

    def enc(x: Any, depth: int) -> Any:
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_NODES:
            raise WireError("value too deeply nested or too large")
        if x is None or isinstance(x, bool | str):
            return x
        if isinstance(x, int):
            return int(x)
        if isinstance(x, float):
            return float(x)
        if isinstance(x, np.generic):
            return enc(x.item(), depth)
        is_tensor = torch is not None and isinstance(x, torch.Tensor)
        if is_tensor or isinstance(x, np.ndarray):
            if is_tensor:
                t = x.detach().cpu()
                if t.dtype == torch.bfloat16:
                    t = t.float()
                arr = np.ascontiguousarray(t.numpy())
            else:
                arr = np.ascontiguousarray(x)
            if arr.dtype.str not in ALLOWED_DTYPES:
                raise WireError(f"array dtype {arr.dtype} is not allowed")
            buffers.append(arr.tobytes())
            return {
                "__nd__": len(buffers) - 1,
                "dtype": arr.dtype.str,
                "shape": [int(d) for d in x.shape],  # ascontiguousarray makes 0-d arrays 1-d
                "torch": bool(is_tensor),
            }
        if isinstance(x, list):
            return [enc(v, depth + 1) for v in x]
        if isinstance(x, tuple):
            return {"__tuple__": [enc(v, depth + 1) for v in x]}
        if isinstance(x, dict):
            if not all(isinstance(k, str) for k in x):
                raise WireError("dict keys must be str")
            return {"__dict__": {k: enc(v, depth + 1) for k, v in x.items()}}
        raise WireError(f"values of type {type(x).__name__} cannot be sent")

    tree = enc(obj, 0)
    header = json.dumps({"tree": tree, "sizes": [len(b) for b in buffers]}).encode()
    payload = _HDR.pack(len(header)) + header + b"".join(buffers)
    if len(payload) > MAX_MESSAGE_BYTES:
        raise WireError(f"message of {len(payload)} bytes exceeds {MAX_MESSAGE_BYTES}")
    return payload


def decode(payload: bytes | bytearray, *, as_torch: bool = True) -> Any:
    """Decode a payload made by :func:`encode`, validating every size and dtype.

    Args:
        payload: The message body.
        as_torch: Rebuild arrays flagged as tensors as torch tensors (when torch is present).

    Raises:
        WireError: If the payload is malformed in any way.
    """
    try:
        (hlen,) = _HDR.unpack_from(payload, 0)
        header = json.loads(payload[_HDR.size : _HDR.size + hlen])
        sizes = header["sizes"]
        tree = header["tree"]
    except (struct.error, ValueError, KeyError, TypeError, RecursionError) as e:
        raise WireError(f"malformed message header: {e}") from None
    if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
        raise WireError("malformed buffer table")
    offsets = []
    pos = _HDR.size + hlen
    for s in sizes:
        offsets.append(pos)
        pos += s
    if pos != len(payload):
        raise WireError("buffer table does not match the message length")
    count = [0]

    def dec(x: Any, depth: int) -> Any:
        count[0] += 1
        if depth > MAX_DEPTH or count[0] > MAX_NODES:
            raise WireError("value too deeply nested or too large")
        if x is None or isinstance(x, bool | int | float | str):
            return x
        if isinstance(x, list):
            return [dec(v, depth + 1) for v in x]
        if not isinstance(x, dict) or len(x) == 0:
            raise WireError("unexpected node in message")
        if "__tuple__" in x and len(x) == 1 and isinstance(x["__tuple__"], list):
            return tuple(dec(v, depth + 1) for v in x["__tuple__"])
        if "__dict__" in x and len(x) == 1 and isinstance(x["__dict__"], dict):
            return {str(k): dec(v, depth + 1) for k, v in x["__dict__"].items()}
        if set(x) == {"__nd__", "dtype", "shape", "torch"}:
            return _array(x)
        raise WireError("unexpected node in message")

    def _array(x: dict[str, Any]) -> Any:
        idx, dtype, shape = x["__nd__"], x["dtype"], x["shape"]
        if not isinstance(idx, int) or not 0 <= idx < len(sizes):
            raise WireError("array refers to a missing buffer")
        if not isinstance(dtype, str) or dtype not in ALLOWED_DTYPES:
            raise WireError(f"array dtype {dtype!r} is not allowed")
        if not isinstance(shape, list) or len(shape) > 32 or any(type(d) is not int or d < 0 for d in shape):
            raise WireError("bad array shape")
        if any(d > MAX_DIM for d in shape):  # numpy refuses such dims even when another one is 0
            raise WireError("array dimension too large")
        dt = np.dtype(dtype)
        n = int(np.prod(shape, dtype=object)) if shape else 1  # exact: no int64 wrap-around
        if n * dt.itemsize != sizes[idx]:
            raise WireError("array size does not match its buffer")
        arr = np.frombuffer(payload, dtype=dt, count=n, offset=offsets[idx]).reshape(shape).copy()
        torch = _torch(load=True) if (x["torch"] and as_torch) else None
        if torch is not None:
            return torch.from_numpy(arr)
        return arr

    return dec(tree, 0)


def send_message(sock: socket.socket, obj: Any) -> None:
    """Frame and send one encoded value.

    Raises:
        WireError: If the value cannot be encoded.
        OSError: If the socket is closed.
    """
    payload = encode(obj)
    sock.sendall(_LEN.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytearray:
    # Filled in place: no second copy of a large message (the trusted side's peak memory).
    buf = bytearray(n)
    view, pos = memoryview(buf), 0
    while pos < n:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("reply not complete before the deadline")
            sock.settimeout(left)
        got = sock.recv_into(view[pos : pos + (1 << 20)])
        if not got:
            raise EOFError("peer closed the connection")
        pos += got
    return buf


def recv_message(
    sock: socket.socket,
    *,
    as_torch: bool = True,
    deadline: float | None = None,
    max_header: int | None = None,
    max_bytes: int | None = None,
) -> Any:
    """Receive and decode one framed value.

    Args:
        sock: The connected socket.
        as_torch: Rebuild tensors as torch tensors.
        deadline: ``time.monotonic()`` by which the whole message must have arrived (a peer that
            trickles bytes cannot stretch a call); None uses the socket's own timeout per read.
        max_header: Largest JSON header accepted (the trusted side caps what a candidate can make
            it parse); None for no extra cap.
        max_bytes: Largest message accepted, checked before any of it is read (at most
            ``MAX_MESSAGE_BYTES``); None for ``MAX_MESSAGE_BYTES``.

    Raises:
        EOFError: If the peer closed the connection.
        TimeoutError: If the deadline or socket timeout expired.
        WireError: If the message is malformed or too large.
    """
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size, deadline))
    cap = MAX_MESSAGE_BYTES if max_bytes is None else min(max_bytes, MAX_MESSAGE_BYTES)
    if n > cap:
        raise WireError(f"message of {n} bytes exceeds {cap}")
    payload = _recv_exact(sock, n, deadline)
    if max_header is not None and len(payload) >= _HDR.size:
        (hlen,) = _HDR.unpack_from(payload, 0)
        if hlen > max_header:
            raise WireError(f"message header of {hlen} bytes exceeds {max_header}")
    return decode(payload, as_torch=as_torch)
