"""Seccomp filter that closes covert channels between sandboxes through shared kernel objects.

Runs inside the sandbox (standard library only; nothing here is secret). Every sandbox sees the
same host inodes read-only: ``/usr``, the Python installation, ``/etc``, ``harness/inside``, and the device
nodes bubblewrap binds into ``/dev`` (``/dev/null``...). A private copy per sandbox cannot cover
device nodes, and bind, overlay-free read-only mounts share the inode, so a lock on any of them is
visible to every other sandbox (and to a later phase of the same candidate). This filter therefore
makes the calls that observe or change such shared per-inode or per-uid state harmless:

* ``flock`` and the ``fcntl`` lock commands (``F_SETLK``/``F_SETLKW``, OFD locks) succeed without
  taking a lock (a library taking a lock on its own scratch file keeps working, but locks no
  longer exclude anything, not even inside one sandbox); lock queries (``F_GETLK``,
  ``F_OFD_GETLK``), leases and directory notification (``F_SETLEASE``/``F_GETLEASE``/``F_NOTIFY``)
  fail with ``EINVAL``.
* inotify and fanotify (events on the shared files when another sandbox opens them) fail with
  ``ENOSYS`` / ``EPERM``; keyrings (``add_key``/``keyctl``/``request_key``: the user keyring is
  per uid, not per sandbox) with ``ENOSYS``.
* Page-cache probes: ``cachestat`` and ``io_uring`` fail with ``ENOSYS``, ``preadv2`` with
  ``RWF_NOWAIT`` with ``EOPNOTSUPP``, and ``fadvise64`` (whose ``POSIX_FADV_DONTNEED`` would evict a
  shared file's pages for everyone) does nothing and succeeds.
* Syscalls of another ABI (32-bit ``int 0x80``, x32) fail with ``ENOSYS``, so the numbers above
  cannot be bypassed.

Channels that remain (timing through shared CPU, memory bandwidth, page cache read latency) are
contention channels no filter closes; see the family and sandbox docs.

``python -m harness.inside.syscall_filter PROGRAM ARGS...`` installs the filter and execs the
program; the shim calls :func:`install` itself.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
import sys

# Classic BPF opcodes (linux/filter.h) and seccomp constants (linux/seccomp.h, linux/audit.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_X32_BIT = 0x40000000
_NR, _ARCH = 0, 4


def _arg_low(i: int) -> int:
    """Offset of the low 32 bits of syscall argument ``i`` (little-endian ``seccomp_data``).

    Only the low half is compared: the kernel reads ``cmd`` / ``flags`` as 32-bit ints, so the
    high half is whatever the caller put there and must not decide anything.
    """
    return 16 + 8 * i


_F_GETLK, _F_SETLK, _F_SETLKW = 5, 6, 7
_F_OFD_GETLK, _F_OFD_SETLK, _F_OFD_SETLKW = 36, 37, 38
_F_SETLEASE, _F_GETLEASE, _F_NOTIFY = 1024, 1025, 1026
_RWF_NOWAIT = 0x8

FCNTL_FAKE_OK = (_F_SETLK, _F_SETLKW, _F_OFD_SETLK, _F_OFD_SETLKW)
"""``fcntl`` commands that return 0 without doing anything."""
FCNTL_EINVAL = (_F_GETLK, _F_OFD_GETLK, _F_SETLEASE, _F_GETLEASE, _F_NOTIFY)
"""``fcntl`` commands that fail with ``EINVAL``."""

# name -> (audit arch, syscall numbers); numbers from the kernel's syscall tables.
_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "fcntl": 72,
            "flock": 73,
            "fadvise64": 221,
            "add_key": 248,
            "request_key": 249,
            "keyctl": 250,
            "inotify_init": 253,
            "inotify_add_watch": 254,
            "inotify_init1": 294,
            "fanotify_init": 300,
            "fanotify_mark": 301,
            "preadv2": 327,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "cachestat": 451,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "fcntl": 25,
            "flock": 32,
            "fadvise64": 223,
            "add_key": 217,
            "request_key": 218,
            "keyctl": 219,
            "inotify_init1": 26,
            "inotify_add_watch": 27,
            "fanotify_init": 262,
            "fanotify_mark": 263,
            "preadv2": 286,
            "io_uring_setup": 425,
            "io_uring_enter": 426,
            "io_uring_register": 427,
            "cachestat": 451,
        },
    ),
}

DENIED: dict[str, int] = {
    "inotify_init": errno.ENOSYS,
    "inotify_init1": errno.ENOSYS,
    "inotify_add_watch": errno.ENOSYS,
    "fanotify_init": errno.EPERM,
    "fanotify_mark": errno.EPERM,
    "add_key": errno.ENOSYS,
    "request_key": errno.ENOSYS,
    "keyctl": errno.ENOSYS,
    "io_uring_setup": errno.ENOSYS,
    "io_uring_enter": errno.ENOSYS,
    "io_uring_register": errno.ENOSYS,
    "cachestat": errno.ENOSYS,
    "flock": 0,
    "fadvise64": 0,
}
"""Syscalls answered without running them: the errno they return (0: success)."""


def _ins(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_program(machine: str) -> bytes:
    """The filter for ``machine`` (``os.uname().machine``) as packed ``sock_filter`` structs.

    Raises:
        ValueError: If the architecture is not supported.
    """
    if machine not in _ARCHES:
        raise ValueError(f"no seccomp filter for architecture {machine!r}")
    audit, nrs = _ARCHES[machine]
    prog: list[bytes] = [
        _ins(_LD_W_ABS, _ARCH),
        _ins(_JEQ_K, audit, jt=1),
        _ins(_RET_K, _RET_ERRNO | errno.ENOSYS),
        _ins(_LD_W_ABS, _NR),
    ]
    if machine == "x86_64":
        prog += [_ins(_JGE_K, _X32_BIT, jf=1), _ins(_RET_K, _RET_ERRNO | errno.ENOSYS)]
    for name, err in DENIED.items():
        if name in nrs:
            prog += [_ins(_JEQ_K, nrs[name], jf=1), _ins(_RET_K, _RET_ERRNO | err)]
    # fcntl: the command decides. Accumulator holds the syscall number until the first jump hits.
    prog += [_ins(_JEQ_K, nrs["fcntl"], jf=2 * (len(FCNTL_FAKE_OK) + len(FCNTL_EINVAL)) + 2)]
    prog += [_ins(_LD_W_ABS, _arg_low(1))]
    for cmd in FCNTL_FAKE_OK:
        prog += [_ins(_JEQ_K, cmd, jf=1), _ins(_RET_K, _RET_ERRNO | 0)]
    for cmd in FCNTL_EINVAL:
        prog += [_ins(_JEQ_K, cmd, jf=1), _ins(_RET_K, _RET_ERRNO | errno.EINVAL)]
    prog += [_ins(_RET_K, _RET_ALLOW)]
    # preadv2 with RWF_NOWAIT (reads only what is cached: a page-cache probe).
    prog += [
        _ins(_JEQ_K, nrs["preadv2"], jf=3),
        _ins(_LD_W_ABS, _arg_low(5)),
        _ins(_JSET_K, _RWF_NOWAIT, jf=1),
        _ins(_RET_K, _RET_ERRNO | errno.EOPNOTSUPP),
        _ins(_RET_K, _RET_ALLOW),
    ]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_installed = False


def install() -> None:
    """Install the filter on this process (inherited by every child; cannot be removed).

    Idempotent within a process. Sets ``no_new_privs`` first (required for an unprivileged filter).

    Raises:
        OSError: If the kernel refuses the filter (the sandbox must then not start).
        ValueError: If the architecture is not supported.
    """
    global _installed
    if _installed:
        return
    prog = build_program(os.uname().machine)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    # PR_SET_SECCOMP = 22, SECCOMP_MODE_FILTER = 2
    if libc.prctl(22, 2, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP) failed")
    _installed = True


def main() -> None:
    """``python -m harness.inside.syscall_filter PROGRAM ARGS...``: install the filter, exec PROGRAM."""
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m harness.inside.syscall_filter PROGRAM [ARGS...]")
    install()
    os.execvp(sys.argv[1], sys.argv[1:])


if __name__ == "__main__":
    main()
