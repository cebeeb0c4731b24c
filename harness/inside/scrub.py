"""Cleaning up after a candidate, INSIDE the zygote's sandbox: kill, wipe, compare with a baseline.

Used by :mod:`.zygote` after each candidate (see its docstring and ``docs/trust-model.md``, "State
between candidates"). Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import stat
import time

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
WIPE_BUDGET_S = 6.0
"""Time for one reap's wipe (within the trusted side's 10 s); past it the zygote is retired."""
START_BUDGET_S = 30.0
"""Time for a starting zygote's wipe (a retired predecessor may have left a large tree)."""
_MAX_DEPTH = 4096
MAX_PROBLEMS = 10
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


def own_state() -> tuple[object, ...]:
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
        deadline = time.monotonic() + START_BUDGET_S
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
        self.state = own_state()  # taken again once the zygote is ready

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
        if own_state() != self.state:
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


def kill_others(children: list[int], reap: str) -> list[int]:
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
