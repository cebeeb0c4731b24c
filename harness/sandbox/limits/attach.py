"""Trusted side of the zygote's attach handshake: learn a forked child's host pid, move it.

A warm child is forked by the zygote inside the sandbox's PID namespace, so the pid the zygote
knows is meaningless here. The child sends one byte with ``SCM_CREDENTIALS``; the kernel
translates its pid into this process's namespace (it cannot be forged: a process may only send
its own pid). The child then waits for the go byte, so no candidate code runs before it is in
its cgroup.
"""

from __future__ import annotations

import socket
import struct

from .memory import CandidateMemory

_UCRED = struct.Struct("3i")


def receive_pid(sock: socket.socket, timeout: float) -> int:
    """Read the child's attach byte and return its pid as seen from this process.

    Raises:
        OSError: On socket errors or a timeout.
        EOFError: If the child closed the socket.
        ValueError: If the message carries no credentials.
    """
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    sock.settimeout(timeout)
    data, anc, _, _ = sock.recvmsg(1, socket.CMSG_SPACE(_UCRED.size))
    if not data:
        raise EOFError("child closed its socket before attaching")
    for level, kind, payload in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= _UCRED.size:
            pid = _UCRED.unpack(payload[: _UCRED.size])[0]
            if pid > 0:
                return int(pid)
    raise ValueError("attach message without credentials")


def attach_child(sock: socket.socket, memory: CandidateMemory, timeout: float) -> int:
    """Move the child on the other end of ``sock`` into ``memory``'s cgroup and let it go.

    Returns:
        The child's host pid.

    Raises:
        OSError, EOFError, ValueError: If the handshake fails.
        CgroupError: If the move fails.
    """
    pid = receive_pid(sock, timeout)
    memory.attach(pid)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 0)
    sock.sendall(b"G")
    return pid
