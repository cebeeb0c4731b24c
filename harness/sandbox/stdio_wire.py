"""Wire messages over a text line stream (a remote sandbox's stdin / stdout).

Remote sandboxes (Modal) expose the in-sandbox server's standard streams, which may be delivered
as text and re-chunked on the way. Each message is therefore one line: the base64 of the same
pickle-free payload ``wire.encode`` makes for sockets, then a newline. Lines that do not start
with the prefix are not protocol (a library printing to stdout) and are skipped by the reader.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from harness.inside import wire

PREFIX = "EVB1:"
"""Marks a protocol line; anything else on the stream is ignored."""


def encode_line(obj: Any) -> bytes:
    """One protocol line (ASCII, newline-terminated) carrying ``obj``.

    Raises:
        WireError: If the value cannot be encoded or is too large.
    """
    payload = wire.encode(obj)
    if len(payload) > wire.MAX_MESSAGE_BYTES:
        raise wire.WireError(f"message of {len(payload)} bytes exceeds {wire.MAX_MESSAGE_BYTES}")
    return PREFIX.encode() + base64.b64encode(payload) + b"\n"


def is_protocol_line(line: str | bytes) -> bool:
    """Whether a line read from the stream is a protocol message."""
    text = line.decode("ascii", errors="replace") if isinstance(line, bytes) else line
    return text.startswith(PREFIX)


def decode_line(line: str | bytes, *, as_torch: bool = False) -> Any:
    """Decode one protocol line.

    Raises:
        WireError: If the line is not a well-formed protocol message.
    """
    text = line.decode("ascii", errors="replace") if isinstance(line, bytes) else line
    text = text.strip()
    if not text.startswith(PREFIX):
        raise wire.WireError("not a protocol line")
    body = text[len(PREFIX) :]
    if len(body) > (wire.MAX_MESSAGE_BYTES * 4) // 3 + 4:
        raise wire.WireError("protocol line too long")
    try:
        payload = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError) as e:
        raise wire.WireError(f"bad base64 in protocol line: {e}") from e
    return wire.decode(payload, as_torch=as_torch)
