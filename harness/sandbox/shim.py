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
import stat
import struct
import sys
import time
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


# -- cleaning up after a candidate ----------------------------------------------------------
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_WIPE_BUDGET_S = 6.0
"""Time for one reap's wipe (within the trusted side's 10 s); past it the zygote is retired."""
_START_BUDGET_S = 30.0
"""Time for a starting zygote's wipe (a retired predecessor may have left a large tree)."""
_MAX_DEPTH = 4096
_MAX_PROBLEMS = 10
_RLIMITS = tuple(sorted(n for n in dir(resource) if n.startswith("RLIMIT_")))
_IPC = {"shm": "shmid", "sem": "semid", "msg": "msqid"}
_IPC_RMID = 0

Sig = tuple[int, int, int, bool]
"""A file's type, permission bits, owner, and whether it is a mount point."""


def _sig(st: os.stat_result, mount: bool = False) -> Sig:
    return stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, mount


class _OutOfBudget(Exception):
    pass


def _clear(root: str, uid: int, deadline: float, keep: dict[tuple[str, ...], Sig]) -> tuple[dict, str]:
    """Delete every entry ``uid`` owns under ``root`` (on root's file system), except ``keep``.

    Iterative through directory descriptors, one open at a time (``..`` leads back up, checked
    against the inode it left): no recursion or path-length limit applies, and neither a mount
    nor a symlink is entered. A directory ``uid`` owns is made accessible first (the owner can
    always chmod), so mode 000 cannot defeat it.

    Returns:
        ``(left, error)``: ``left`` maps the relative path of each remaining entry that ``uid`` owns
        or that is a mount point to its :data:`Sig`; ``error`` is empty unless the wipe failed or
        a budget ran out.
    """
    left: dict[tuple[str, ...], Sig] = {}
    fd = os.open(root, _DIR_FLAGS)
    dev = os.fstat(fd).st_dev
    names: list[str] = []  # the path from root to fd's directory
    inodes: list[int] = []  # the inode of each directory on that path (checked on the way up)
    try:
        todo = [_scan(fd, (), uid, dev, keep, left, deadline)]  # per level: subdirectories to visit
        while True:
            if todo[-1]:
                down = todo[-1].pop()
                try:
                    inner = os.open(down, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    st = os.stat(down, dir_fd=fd, follow_symlinks=False)
                    if st.st_uid == uid:
                        left[(*names, down)] = _sig(st)
                    continue
                inodes.append(os.fstat(fd).st_ino)
                os.close(fd)
                fd = inner
                names.append(down)
                if len(names) > _MAX_DEPTH:
                    return left, f"{root}: a tree deeper than {_MAX_DEPTH} levels"
                todo.append(_scan(fd, tuple(names), uid, dev, keep, left, deadline))
                continue
            todo.pop()
            if not names:
                return left, ""
            up = os.open("..", _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = up
            if os.fstat(fd).st_ino != inodes.pop():
                return left, f"{root}: the tree moved while it was wiped"
            name = names.pop()
            rel = (*names, name)
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            if st.st_uid == uid and (rel in keep or not _quiet(os.rmdir, name, dir_fd=fd)):
                left[rel] = _sig(st)
    except _OutOfBudget:
        return left, f"{root}: the wipe ran out of time"
    except OSError as e:
        return left, f"{root}: the wipe failed: {e}"
    finally:
        os.close(fd)


def _scan(
    fd: int, here: tuple[str, ...], uid: int, dev: int, keep: dict, left: dict, deadline: float
) -> list[str]:
    """One pass over ``fd``'s directory: delete ``uid``'s files, return the subdirectories to visit.

    Raises:
        _OutOfBudget: If ``deadline`` passes.
    """
    dirs = []
    with os.scandir(fd) as it:
        for i, entry in enumerate(it):
            if i % 1024 == 0 and time.monotonic() > deadline:
                raise _OutOfBudget
            name, rel = entry.name, (*here, entry.name)
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except OSError:
                continue
            mine = st.st_uid == uid
            if st.st_dev != dev:
                left[rel] = _sig(st, mount=True)
            elif stat.S_ISDIR(st.st_mode):
                if mine and rel not in keep and st.st_mode & 0o700 != 0o700:
                    _quiet(os.chmod, name, 0o700, dir_fd=fd)  # just seen as a directory, not a link
                dirs.append(name)
            elif mine and (rel in keep or not _quiet(os.unlink, name, dir_fd=fd)):
                left[rel] = _sig(st)
    return dirs


def _quiet(fn: object, *args: object, **kwargs: object) -> bool:
    try:
        fn(*args, **kwargs)  # type: ignore[operator]
        return True
    except OSError:
        return False


def _root_state(path: str) -> tuple[int, int, tuple[str, ...]]:
    st = os.lstat(path)
    return st.st_mode, st.st_uid, tuple(sorted(os.listxattr(path, follow_symlinks=False)))


def _ipc_objects(uid: int) -> list[tuple[str, int]]:
    """SysV IPC objects of this IPC namespace that ``uid`` owns or created."""
    found = []
    for kind, column in _IPC.items():
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="ascii") as f:
                head, *rows = f.read().splitlines()
        except (OSError, ValueError):
            continue  # a kernel without SysV IPC
        cols = head.split()
        for row in rows:
            rec = dict(zip(cols, row.split(), strict=False))
            if uid in (int(rec["uid"]), int(rec["cuid"])):
                found.append((kind, int(rec[column])))
    return found


def _remove_ipc(uid: int) -> list[str]:
    """Remove ``uid``'s SysV shared memory, semaphores and message queues; returns what is left."""
    libc = ctypes.CDLL(None, use_errno=True)
    for kind, ident in _ipc_objects(uid):
        if kind == "sem":
            libc.semctl(ident, 0, _IPC_RMID)
        else:
            getattr(libc, f"{kind}ctl")(ident, _IPC_RMID, None)
    return [f"SysV {kind} {ident} is still there" for kind, ident in _ipc_objects(uid)]


def _own_state() -> tuple[object, ...]:
    """What each forked child inherits that another process of this uid can change from outside.

    Another candidate process may renice the zygote, move its CPU affinity or scheduling policy,
    or lower its limits (``prlimit``); it cannot raise them again, so a change retires it.
    """
    limits = tuple(resource.getrlimit(getattr(resource, n)) for n in _RLIMITS)
    return (
        os.getpriority(os.PRIO_PROCESS, 0),
        os.sched_getscheduler(0),
        sorted(os.sched_getaffinity(0)),
        limits,
    )


class Baseline:
    """What the zygote's scratch space and inherited state look like when no candidate has run.

    Taken once, after a first wipe: what is left then (read-only binds, the directories leading to
    them) must be all that is left after every candidate.
    """

    def __init__(self, scratch: list[str], ipc: bool) -> None:
        """Wipe ``scratch`` (and SysV IPC objects, with ``ipc``) and record what is left.

        Raises:
            RuntimeError: If something of this uid is left that no mount explains (a predecessor's
                leftovers the wipe cannot remove): the zygote must not start on top of it.
        """
        self.uid, self.ipc = os.getuid(), ipc
        deadline = time.monotonic() + _START_BUDGET_S
        self.left: dict[str, dict[tuple[str, ...], Sig]] = {}
        self.roots: dict[str, tuple[int, int, tuple[str, ...]]] = {}
        problems = _remove_ipc(self.uid) if ipc else []
        for d in scratch:
            left, error = _clear(d, self.uid, deadline, {})
            mounts = [rel for rel, sig in left.items() if sig[3]]
            stray = [rel for rel, sig in left.items() if not any(m[: len(rel)] == rel for m in mounts)]
            problems += [error] if error else []
            problems += [f"{d}: cannot remove {'/'.join(rel)[:200]!r}" for rel in stray[:3]]
            self.left[d] = left
            self.roots[d] = _root_state(d)
        if problems:
            raise RuntimeError("scratch space is not clean: " + "; ".join(problems))
        self.state = _own_state()  # taken again once the zygote is ready

    def restore(self, scratch: list[str], deadline: float) -> list[str]:
        """Wipe ``scratch`` and SysV IPC back to the baseline; returns what differs afterwards."""
        problems = _remove_ipc(self.uid) if self.ipc else []
        for d in scratch:
            try:
                left, error = _clear(d, self.uid, deadline, self.left[d])
                _repair_root(d, self.roots[d])
                problems += [error] if error else []
                extra = sorted(set(left.items()) ^ set(self.left[d].items()))
                problems += [
                    f"{d}: {'/'.join(rel)[:200]!r} differs from the baseline" for rel, _ in extra[:3]
                ]
                if _root_state(d) != self.roots[d]:
                    problems.append(f"{d}: mode, owner or extended attributes changed")
            except OSError as e:
                problems.append(f"{d}: {e}")
        if _own_state() != self.state:
            problems.append("the zygote's nice value, scheduling, CPU affinity or limits were changed")
        return problems


def _repair_root(path: str, base: tuple[int, int, tuple[str, ...]]) -> None:
    """Undo what a candidate may change on a scratch root itself: its mode (if it owns it), user xattrs."""
    mode, owner, xattrs = base
    st = os.lstat(path)
    if st.st_uid == os.getuid() and st.st_mode != mode:
        _quiet(os.chmod, path, stat.S_IMODE(mode))
    for name in os.listxattr(path, follow_symlinks=False):
        if name not in xattrs:
            _quiet(os.removexattr, path, name, follow_symlinks=False)


def _kill_others(children: list[int], reap: str) -> list[int]:
    """Kill what candidates left behind; returns the processes still alive after that (none, normally).

    ``reap="all"``: every process visible in /proc but pid 1 and this one (only safe in a private
    PID namespace, or when this process's uid is private to candidates: signals to other uids fail).
    ``reap="group"``: only the session / process group of each spawned child.
    """
    deadline = time.monotonic() + 2.0
    while True:
        alive = _survivors(children, reap)
        if not alive or time.monotonic() > deadline:
            return alive
        for pid in alive if reap == "all" else children:
            try:
                if reap == "all":
                    os.kill(pid, signal.SIGKILL)
                else:
                    os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap_children()
        time.sleep(0.01)


def _reap_children() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _survivors(children: list[int], reap: str) -> list[int]:
    """Live (not zombie) processes a candidate may have left: of this uid (``all``) or its groups."""
    me, uid, found = os.getpid(), os.getuid(), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, me):
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            with open(f"/proc/{name}/status", "rb") as f:
                real_uid = int(next(ln for ln in f if ln.startswith(b"Uid:")).split()[1])
        except (OSError, StopIteration, IndexError, ValueError):
            continue
        if fields[0] in (b"Z", b"X"):
            continue
        if real_uid == uid if reap == "all" else (int(fields[2]) in children or int(fields[3]) in children):
            found.append(int(name))
    return found


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
    baseline.state = _own_state()
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
            alive = _kill_others(children, reap)
            children.clear()
            problems = [f"processes {alive[:5]} survived SIGKILL"] if alive else []
            try:
                problems += baseline.restore(scratch, time.monotonic() + _WIPE_BUDGET_S)
            except Exception as e:  # noqa: BLE001 - never report clean after a failed check
                problems.append(f"the check failed: {e!r}")
            wire.send_message(ctrl, {"type": "reaped", "problems": problems[:_MAX_PROBLEMS]})
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
