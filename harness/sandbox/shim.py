"""Candidate-side server, run inside the sandbox (untrusted territory).

Modes:
  ``serve FD``   load one candidate program and answer calls over the socket FD;
  ``zygote FD``  pre-import heavy modules once, then fork a fresh child per candidate
                 (each child runs ``serve`` on a new socket passed back with SCM_RIGHTS),
                 and after each candidate kill every other process and wipe scratch space.

Imports only the standard library, numpy, ``wire`` and ``syscall_filter`` (next to this file),
and installs the latter's seccomp filter before any candidate code runs; nothing here is secret,
the candidate may read it.
"""

from __future__ import annotations

import ctypes
import gc
import importlib.util
import os
import resource
import signal
import socket
import struct
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import syscall_filter  # noqa: E402
import wire  # noqa: E402

_TB_LIMIT = 4000


def _error_reply(kind: str, exc: BaseException) -> dict:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return {
        "type": "error",
        "kind": kind,
        "exc": type(exc).__name__,
        "message": str(exc)[:_TB_LIMIT],
        "traceback": tb[-_TB_LIMIT:],
    }


def _load_driver(source: str) -> object:
    """Load the family's sandbox driver (trusted, non-secret code) as module ``evobench_driver``."""
    spec = importlib.util.spec_from_loader("evobench_driver", loader=None)
    assert spec is not None
    driver = importlib.util.module_from_spec(spec)
    sys.modules["evobench_driver"] = driver
    exec(compile(source, "<evobench_driver>", "exec"), driver.__dict__)  # noqa: S102 - harness code
    return driver


def serve(sock: socket.socket) -> None:
    """Answer ``load`` / ``call`` / ``exit`` requests until the peer closes.

    ``load`` may carry ``driver`` (source text): it is loaded after the candidate, and a ``call``
    with ``driver: true`` runs ``driver.<fn>(candidate_module, *args)`` instead of ``candidate.<fn>``.
    """
    module = None
    driver = None
    wire.send_message(sock, {"type": "ready", "pid": os.getpid()})
    while True:
        try:
            req = wire.recv_message(sock)
        except EOFError:
            os._exit(0)
        op = req.get("op") if isinstance(req, dict) else None
        if op == "load":
            try:
                path = os.path.join(os.getcwd(), req["filename"])
                with open(path, "w", encoding="utf-8") as f:
                    f.write(req["source"])
                spec = importlib.util.spec_from_file_location("candidate", path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                sys.modules["candidate"] = module
                spec.loader.exec_module(module)
                if req.get("driver"):
                    driver = _load_driver(req["driver"])
                reply = {"type": "loaded"}
            except BaseException as e:  # noqa: BLE001 - report anything the candidate raises
                reply = _error_reply("load", e)
        elif op == "call":
            try:
                if req.get("driver"):
                    fn = getattr(driver, req["fn"], None)
                    if not callable(fn):
                        raise RuntimeError(f"the sandbox driver has no function {req['fn']!r}")
                    value = fn(module, *req["args"])
                else:
                    fn = getattr(module, req["fn"], None)
                    if not callable(fn):
                        raise AttributeError(f"candidate has no function {req['fn']!r}")
                    value = fn(*req["args"])
                payload = wire.encode({"type": "result", "value": value})
            except BaseException as e:  # noqa: BLE001
                payload = wire.encode(_error_reply("call", e))
            sock.sendall(wire._LEN.pack(len(payload)) + payload)
            continue
        elif op == "echo":
            # Transport calibration by the trusted side, before any candidate code is loaded.
            reply = {"type": "result", "value": req.get("args")}
        elif op == "exit":
            os._exit(0)
        else:
            reply = {
                "type": "error",
                "kind": "protocol",
                "exc": "ProtocolError",
                "message": f"bad op {op!r}",
                "traceback": "",
            }
        wire.send_message(sock, reply)


def _apply_limits(limits: dict) -> None:
    for name, value in limits.items():
        res = getattr(resource, name)
        resource.setrlimit(res, (int(value), int(value)))


def _limit_data(headroom: int) -> None:
    """Fallback memory limit: ``RLIMIT_DATA`` = private writable memory now + ``headroom`` bytes.

    Counted from the current size, so the interpreter and pre-imported modules (inherited from a
    zygote, or imported before any candidate code) are not charged to the candidate.
    """
    if headroom <= 0:
        return
    now = 0
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmData:"):
                now = int(line.split()[1]) * 1024
    resource.setrlimit(resource.RLIMIT_DATA, (now + headroom, now + headroom))


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


def _wipe(path: str, dev: int | None = None) -> None:
    """Delete everything under ``path`` that lives on its file system (never descend into mounts)."""
    try:
        if dev is None:
            dev = os.lstat(path).st_dev
        entries = list(os.scandir(path))
    except OSError:
        return
    for entry in entries:
        try:
            st = entry.stat(follow_symlinks=False)
            if st.st_dev != dev:
                continue  # a read-only bind (e.g. a venv under /tmp): not scratch
            if entry.is_dir(follow_symlinks=False):
                _wipe(entry.path, dev)
                os.rmdir(entry.path)
            else:
                os.unlink(entry.path)
        except OSError:
            pass


def _kill_others(children: list[int], reap: str) -> None:
    """Kill what candidates left behind.

    ``reap="all"``: every process visible in /proc but pid 1 and this one (only safe in a private
    PID namespace, or when this process's uid is private to candidates: signals to other uids fail).
    ``reap="group"``: only the session / process group of each spawned child.
    """
    me = os.getpid()
    if reap != "all":
        for pid in children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap_children()
        return
    for _ in range(5):
        found = False
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in (1, me):
                found = True
                try:
                    os.kill(int(name), signal.SIGKILL)
                except OSError:
                    pass
        _reap_children()
        if not found:
            return


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def zygote(
    ctrl: socket.socket, preload: list[str], scratch: list[str], reap: str, *, collapse: bool = True
) -> None:
    """Pre-import modules, then fork one fresh child per ``spawn`` request.

    Each child works in a fresh directory under the zygote's cwd; after each candidate the zygote
    kills leftovers (see :func:`_kill_others`) and wipes the ``scratch`` directories. ``collapse``
    moves the zygote's memory to huge pages first (pays off from the second candidate on).
    """
    syscall_filter.install()  # before any candidate code: no locks on shared inodes (see module)
    root = os.getcwd()
    children: list[int] = []
    for d in scratch:  # a restarted zygote starts clean (its predecessor may have been killed)
        _wipe(d)
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
                    _apply_limits(req["limits"])
                    _limit_data(int(req.get("data_headroom") or 0))
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
            _kill_others(children, reap)
            children.clear()
            for d in scratch:
                _wipe(d)
            wire.send_message(ctrl, {"type": "reaped"})
        else:
            os._exit(0)


def main() -> None:
    """Entry point: ``python -I shim.py serve FD [PRELOAD [DATA]]`` or ``zygote FD PRELOAD SCRATCH REAP``.

    PRELOAD and SCRATCH are comma-separated lists (may be empty); REAP is ``all`` or ``group``;
    DATA is the ``RLIMIT_DATA`` headroom in bytes applied after the pre-imports (0: none).
    """
    mode, fd = sys.argv[1], int(sys.argv[2])
    sock = socket.socket(fileno=fd)
    if mode == "serve":
        syscall_filter.install()
        for name in sys.argv[3].split(",") if len(sys.argv) > 3 else []:
            if name:
                importlib.import_module(name)
        _limit_data(int(sys.argv[4]) if len(sys.argv) > 4 else 0)
        serve(sock)
    elif mode == "zygote":
        preload, scratch, reap = sys.argv[3], sys.argv[4], sys.argv[5]
        zygote(sock, [m for m in preload.split(",") if m], [d for d in scratch.split(",") if d], reap)
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
