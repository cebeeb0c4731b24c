"""The warm zygote, run INSIDE the sandbox: pre-import once, fork a fresh child per candidate.

``zygote FD PRELOAD SCRATCH REAP`` (through :mod:`.shim`), or called directly by a container's
forked child (``harness/sandbox/prefork.py``). Each child runs :func:`.serve.serve` on a new socket
passed back with SCM_RIGHTS; after each candidate the zygote kills every other process and wipes
scratch space (:mod:`.scrub`).
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import os
import resource
import socket
import struct
import sys
import time
import traceback

from . import syscall_filter, wire
from .scrub import MAX_PROBLEMS, WIPE_BUDGET_S, Baseline, kill_others, own_state
from .serve import apply_limits, limit_data, serve


def _await_attach(sock: socket.socket) -> None:
    """Send this process's pid (the kernel translates it) and wait to be moved into a cgroup.

    The trusted side moves it into the candidate's cgroup first: no candidate code runs outside it.
    """
    creds = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
    sock.sendmsg([b"A"], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
    if sock.recv(1) != b"G":
        os._exit(71)


def _set_nondumpable() -> None:
    # A non-dumpable process cannot be ptraced, nor its /proc/<pid>/mem read, by same-uid processes.
    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except OSError:
        pass


_HUGE = 2 << 20
_MADV_COLLAPSE = 25  # synchronous, independent of the THP sysfs mode (unless 'never')


def _collapse_to_huge_pages() -> int:
    """Back the zygote's anonymous memory (heap, interpreter arenas) with 2 MiB pages; returns how many.

    After importing torch the zygote holds ~150 MB of anonymous memory. ``fork`` copies one page
    table entry per 4 KiB page and every child's exit tears them down again: ~10 ms of kernel time
    per candidate. With transparent huge pages that is one entry per 2 MiB. ``MADV_COLLAPSE``
    (Linux 6.1+) converts the existing pages in place (a child's copy-on-write still copies 4 KiB,
    and memory the child allocates later keeps the system's THP policy); where it is unavailable
    nothing changes.
    """
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        with open("/proc/self/maps", encoding="ascii") as f:
            maps = f.read().splitlines()
    except (OSError, AttributeError):
        return 0
    done = 0
    for line in maps:
        fields = line.split()
        path = fields[5] if len(fields) > 5 else ""
        if not fields[1].startswith("rw") or path not in ("", "[heap]"):
            continue
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        lo, hi = (lo + _HUGE - 1) & ~(_HUGE - 1), hi & ~(_HUGE - 1)
        if hi - lo < _HUGE:
            continue
        if madvise(lo, hi - lo, _MADV_COLLAPSE) == 0:
            done += (hi - lo) // _HUGE
    return done


def zygote(
    ctrl: socket.socket, preload: list[str], scratch: list[str], reap: str, *, collapse: bool = True
) -> None:
    """Pre-import modules, then fork one fresh child per ``spawn`` request.

    Each child works in a fresh directory under the zygote's cwd. After each candidate the zygote
    kills leftovers (see :func:`_kill_others`), wipes the ``scratch`` directories and, with ``reap
    == "all"`` (its uid or IPC namespace is the candidates' alone), their SysV IPC objects, then
    checks that all of it, and what a child inherits from it, is back to the :class:`Baseline`;
    the ``reaped`` reply lists what is not (the trusted side then retires this zygote). POSIX
    message queues cannot be listed without a mount, so none can be created (``RLIMIT_MSGQUEUE``
    0). ``collapse`` moves the zygote's memory to huge pages first (pays off from the second
    candidate on).

    Raises:
        RuntimeError: If the scratch space cannot be wiped at start (reported before ``ready``).
    """
    syscall_filter.install()  # before any candidate code: no locks on shared inodes (see module)
    resource.setrlimit(resource.RLIMIT_MSGQUEUE, (0, 0))
    root = os.getcwd()
    children: list[int] = []
    # A restarted zygote starts clean (its predecessor may have been killed), or not at all.
    baseline = Baseline(scratch, ipc=reap == "all")
    for name in preload:
        if name:
            importlib.import_module(name)
    _set_nondumpable()
    # Move every pre-imported object out of the collector's reach: collections in the zygote or a
    # child would otherwise touch (and copy-on-write) every page holding a torch object.
    gc.collect()
    gc.freeze()
    if collapse:
        _collapse_to_huge_pages()
    baseline.state = own_state()
    counter = 0
    wire.send_message(ctrl, {"type": "ready", "pid": os.getpid()})
    while True:
        try:
            req = wire.recv_message(ctrl)
        except EOFError:
            os._exit(0)
        op = req.get("op")
        if op == "spawn":
            counter += 1
            parent_end, child_end = socket.socketpair()
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            pid = os.fork()
            if pid == 0:
                try:
                    ctrl.close()
                    parent_end.close()
                    os.close(out_r)
                    os.close(err_r)
                    os.dup2(out_w, 1)
                    os.dup2(err_w, 2)
                    workdir = os.path.join(root, f"c{counter}-{os.getpid()}")
                    os.mkdir(workdir, 0o700)
                    os.chdir(workdir)
                    os.environ.clear()
                    os.environ.update(req["env"])
                    os.setsid()
                    if req.get("hold"):
                        _await_attach(child_end)
                    apply_limits(req["limits"])
                    limit_data(int(req.get("data_headroom") or 0))
                    serve(child_end)
                except BaseException:  # noqa: BLE001 - report why the child could not start
                    traceback.print_exc()
                    sys.stderr.flush()
                finally:
                    os._exit(70)
            child_end.close()
            os.close(out_w)
            os.close(err_w)
            socket.send_fds(ctrl, [b"F"], [parent_end.fileno(), out_r, err_r])
            parent_end.close()
            os.close(out_r)
            os.close(err_r)
            children.append(pid)
            wire.send_message(ctrl, {"type": "spawned", "pid": pid})
        elif op == "reap":
            alive = kill_others(children, reap)
            children.clear()
            problems = [f"processes {alive[:5]} survived SIGKILL"] if alive else []
            try:
                problems += baseline.restore(scratch, time.monotonic() + WIPE_BUDGET_S)
            except Exception as e:  # noqa: BLE001 - never report clean after a failed check
                problems.append(f"the check failed: {e!r}")
            wire.send_message(ctrl, {"type": "reaped", "problems": problems[:MAX_PROBLEMS]})
        else:
            os._exit(0)
