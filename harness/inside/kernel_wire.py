"""Kernel wire codec: a length-prefixed JSON header, then each array's raw bytes.

Shared by the in-sandbox kernel driver (:mod:`.kernel_driver`) and the trusted scorer side
(``harness/kernels/session.py``, ``calibrate.py``, ``echo.py``, KuaiRec's trainer): one module, one
codec. Standard library and numpy only; every decoder caps sizes and depth before allocating.
"""

import json
import math
import re
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

_LEN = struct.Struct(">Q")

# -- wire: length-prefixed JSON header, then each array's raw bytes -----------------------------
# The header lists every array's dtype and shape; the bytes follow, concatenated, in that order. No
# zip, no compression, no pickle: a receiver knows the size of everything before it allocates, and
# reads straight into the arrays it allocated (``recv_into``), so a reply costs its own size once.
MAX_HEADER = 1 << 20
MAX_DEPTH = 32
MAX_NDIM = 8
# Torch dtype name -> NumPy storage dtype. bfloat16 has no NumPy dtype: it travels as its 16-bit
# pattern. Nothing else crosses the wire.
WIRE_DTYPES = {
    "float64": "float64",
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "int16",
    "int64": "int64",
    "int32": "int32",
    "int16": "int16",
    "int8": "int8",
    "uint8": "uint8",
    "bool": "bool",
}
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)


def json_depth(raw: bytes) -> int:
    """Deepest ``[``/``{`` nesting of a JSON text (strings ignored), without recursing."""
    body = np.frombuffer(_STRINGS.sub(b"", raw), dtype=np.uint8)
    step = (body == ord("[")).astype(np.int64) + (body == ord("{")) - (body == ord("]")) - (body == ord("}"))
    return int(np.cumsum(step).max(initial=0))


def load_json(raw: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` after a nesting-depth scan.

    Raises:
        ValueError: Nested deeper than ``max_depth`` (never ``RecursionError``) or not JSON.
    """
    depth = json_depth(raw)
    if depth > max_depth:
        raise ValueError(f"JSON nested {depth} deep (limit {max_depth})")
    return json.loads(raw)


def _flat(a: np.ndarray) -> memoryview:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8).data


def send(sock: Any, header: dict[str, Any], arrays: list[tuple[str, np.ndarray]] | None = None) -> None:
    """Send one message: a JSON header and ``(torch dtype name, array)`` pairs."""
    arrays = arrays or []
    specs = [{"dtype": d, "shape": list(a.shape)} for d, a in arrays]
    head = json.dumps({**header, "arrays": specs}).encode()
    sock.sendall(_LEN.pack(len(head)) + head)
    for _, a in arrays:
        if a.nbytes:
            sock.sendall(_flat(a))


def _exact(sock: Any, n: int) -> bytes:
    buf = bytearray(n)
    _fill(sock, memoryview(buf))
    return bytes(buf)


def _fill(sock: Any, view: memoryview) -> None:
    got = 0
    while got < len(view):
        k = sock.recv_into(view[got : got + (1 << 22)])
        if not k:
            raise EOFError("connection closed")
        got += k


def recv_header(sock: Any, max_header: int = MAX_HEADER) -> dict[str, Any]:
    """Read one header (size capped before reading, depth checked before parsing).

    Raises:
        ValueError: Over the cap, too deep, not JSON or not an object.
        EOFError: The peer closed the connection.
    """
    (n,) = _LEN.unpack(_exact(sock, 8))
    if n > max_header:
        raise ValueError(f"header of {n} bytes over the {max_header}-byte cap")
    header = load_json(_exact(sock, n))
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")
    return header


def array_specs(header: dict[str, Any]) -> list[tuple[str, tuple[int, ...]]]:
    """The ``(dtype, shape)`` list a header declares, validated (nothing is allocated).

    Raises:
        ValueError: Not a list of known dtypes with shapes of at most ``MAX_NDIM`` non-negative ints.
    """
    raw = header.get("arrays", [])
    if not isinstance(raw, list):
        raise ValueError("'arrays' is not a list")
    out = []
    for spec in raw:
        if not isinstance(spec, dict) or spec.get("dtype") not in WIRE_DTYPES:
            raise ValueError(f"array spec {str(spec)[:80]} has no known dtype")
        shape = spec.get("shape")
        ok = isinstance(shape, list) and len(shape) <= MAX_NDIM
        if not ok or not all(type(d) is int and 0 <= d < 1 << 48 for d in shape):  # type: ignore[union-attr]
            raise ValueError(f"array spec {str(spec)[:80]} has no valid shape")
        out.append((str(spec["dtype"]), tuple(shape)))  # type: ignore[arg-type]
    return out


def nbytes(specs: list[tuple[str, tuple[int, ...]]]) -> int:
    """Bytes the declared arrays occupy (Python ints: no overflow)."""
    return sum(math.prod(s) * np.dtype(WIRE_DTYPES[d]).itemsize for d, s in specs)


def recv_arrays(sock: Any, specs: list[tuple[str, tuple[int, ...]]]) -> list[tuple[str, np.ndarray]]:
    """Allocate the declared arrays and read their bytes into them (validate ``specs`` first)."""
    out = []
    for d, shape in specs:
        a = np.empty(shape, dtype=WIRE_DTYPES[d])
        if a.nbytes:
            _fill(sock, a.reshape(-1).view(np.uint8).data)
        out.append((d, a))
    return out


def recv(
    sock: Any, max_header: int = MAX_HEADER, max_payload: int = 1 << 40
) -> tuple[dict[str, Any], list[tuple[str, np.ndarray]]]:
    """Receive one message (header, then the arrays it declares).

    Raises:
        ValueError: Malformed header, or a declared payload over ``max_payload`` (raised before
            any array is allocated).
        EOFError: The peer closed the connection.
    """
    header = recv_header(sock, max_header)
    specs = array_specs(header)
    m = nbytes(specs)
    if m > max_payload:
        raise ValueError(f"payload of {m} bytes over the {max_payload}-byte cap")
    return header, recv_arrays(sock, specs)


def encode_tree(tree: Any, torch: Any, arrays: list[tuple[str, np.ndarray]]) -> Any:
    """Nested lists / dicts / tensors / numbers -> JSON tree, tensors appended to ``arrays``."""
    if isinstance(tree, (list, tuple)):
        return [encode_tree(x, torch, arrays) for x in tree]
    if isinstance(tree, dict):
        return {"__dict__": {str(k): encode_tree(v, torch, arrays) for k, v in tree.items()}}
    if torch is not None and torch.is_tensor(tree):
        t = tree.detach().to("cpu").contiguous()
        dtype = str(t.dtype).replace("torch.", "")
        if dtype not in WIRE_DTYPES:
            raise TypeError(f"cannot send a {dtype} tensor")
        if dtype == "bfloat16":
            t = t.view(torch.int16)
        arrays.append((dtype, t.numpy()))
        return {"__tensor__": len(arrays) - 1}
    if isinstance(tree, np.ndarray):
        if str(tree.dtype) not in WIRE_DTYPES:
            raise TypeError(f"cannot send a {tree.dtype} array")
        arrays.append((str(tree.dtype), tree))
        return {"__tensor__": len(arrays) - 1}
    if tree is None or isinstance(tree, (bool, int, float, str)):
        return tree
    raise TypeError(f"cannot send a {type(tree).__name__}")


def decode_tree(
    tree: Any, arrays: list[tuple[str, np.ndarray]], to_leaf: Callable[[np.ndarray, str], Any]
) -> Any:
    """Inverse of ``encode_tree``; ``to_leaf(array, dtype)`` builds each tensor.

    Raises:
        ValueError: A tensor reference that is not an index of ``arrays``.
    """
    if isinstance(tree, list):
        return [decode_tree(x, arrays, to_leaf) for x in tree]
    if isinstance(tree, dict) and "__dict__" in tree:
        if not isinstance(tree["__dict__"], dict):
            raise ValueError("'__dict__' is not an object")
        return {k: decode_tree(v, arrays, to_leaf) for k, v in tree["__dict__"].items()}
    if isinstance(tree, dict) and "__tensor__" in tree:
        i = tree["__tensor__"]
        if type(i) is not int or not 0 <= i < len(arrays):
            raise ValueError(f"tensor reference {str(i)[:40]} is not an array index")
        d, a = arrays[i]
        return to_leaf(a, d)
    return tree
