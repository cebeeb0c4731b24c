"""Backend conformance suite: every ``Sandbox`` implementation (local, docker, modal) must pass it.

Use it by subclassing :class:`SandboxConformance` in a ``test_*.py`` module and providing

* a class- or module-scoped fixture ``backend`` yielding a shared :class:`~harness.sandbox.base.Sandbox`
  (the suite closes nothing it did not create), and
* a method ``make_backend(**overrides)`` building a *fresh* backend (used where the check needs a
  clean process environment, a single worker, or another environments root).

Every candidate below is hostile in one specific way and every check is built so that a sandbox
lacking the corresponding protection makes the assertion fail: positive controls prove that the
probe really did what it tried (spawned its processes, planted its leaks, could write where it is
allowed to), so "nothing found" cannot pass vacuously.

This module has no ``test_`` prefix and defines no module-level tests, so pytest collects its
checks only through the subclasses.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, ClassVar

import pytest

from harness.envs.registry import Registry, UnknownIdError, Variant, default_registry
from harness.evaluation.result import EvalResult, Status
from harness.sandbox.base import Sandbox

ENV_ID = "selftest-tiny"
SLACK_S = 5.0
"""Extra wall time a backend may take past the variant's timeout to report a timeout."""
GONE_WITHIN_S = 3.0
"""How long sandboxed processes may linger on the host after a result is returned."""
RESULT_WAIT_S = 120.0
"""Upper bound for any single evaluation in this suite (a hung backend fails instead of hanging)."""


# -- helpers -----------------------------------------------------------------------------------
def program(body: str, **consts: Any) -> str:
    """A candidate program: ``NAME = repr(value)`` lines followed by the dedented body."""
    head = "".join(f"{k} = {v!r}\n" for k, v in consts.items())
    return head + textwrap.dedent(body)


def new_marker() -> str:
    """A unique 15-character marker (fits in ``/proc/PID/comm``)."""
    return "evo" + uuid.uuid4().hex[:12]


def run_locally(source: str, function: str = "probe") -> Any:
    """Run a probe in the test process itself (positive control of the probe's own logic).

    Only used for probes that are harmless on the host (they read, connect or count).
    """
    ns: dict[str, Any] = {"__name__": "local_probe"}
    exec(compile(source, "<local-probe>", "exec"), ns)  # noqa: S102 - our own test program
    return ns[function]()


def host_pids_with(marker: str) -> list[int]:
    """Live (non-zombie) host processes whose cmdline, comm or environ contains ``marker``."""
    needle = marker.encode()
    me = os.getpid()
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_bytes()
            if stat[stat.rindex(b")") + 2 : stat.rindex(b")") + 3] == b"Z":
                continue
        except (OSError, ValueError):
            continue
        for f in ("cmdline", "comm", "environ"):
            try:
                if needle in Path(f"/proc/{name}/{f}").read_bytes():
                    found.append(int(name))
                    break
            except OSError:
                pass
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()[:200]
    except OSError:
        return b"?"


def wait_gone(marker: str, within: float = GONE_WITHIN_S) -> list[int]:
    """Poll until no host process carries ``marker``; return the survivors (empty when clean)."""
    deadline = time.monotonic() + within
    while True:
        alive = host_pids_with(marker)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def kill_marked(marker: str) -> None:
    """Clean-up after a failed containment check: SIGKILL every host process carrying ``marker``."""
    for pid in host_pids_with(marker):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def describe(res: EvalResult) -> str:
    """Short description of a result for assertion messages."""
    return (
        f"status={res.status} score={res.score} metrics={res.metrics} attempts={res.attempts}\n"
        f"reason={res.reason[-1500:]!r}\nstderr={res.stderr_tail[-800:]!r}"
    )


class TcpServer:
    """A TCP listener on host 127.0.0.1 that counts accepted connections (bounded, threaded)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        end = time.monotonic() + RESULT_WAIT_S
        while not self._stop.is_set() and time.monotonic() < end:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


class TimeoutBatch:
    """Slow candidates submitted at once, so that backends with several workers overlap them.

    Records when each result arrived (seconds after submission). For a ``watch``-ed source, a
    thread scans the host's ``/proc`` for its marker while it runs (the most marked processes seen
    at once: the probe's positive control) and for :data:`GONE_WITHIN_S` after its result (any
    that are still there then: survivors).
    """

    def __init__(
        self, backend: Sandbox, variant: Variant, sources: list[str], watch: dict[str, str], scan: bool
    ) -> None:
        self.t0 = time.monotonic()
        self.futures: dict[str, Future[EvalResult]] = {}
        self.done_after: dict[str, float] = {}
        self.seen: dict[str, int] = {}
        self.survivors: dict[str, list[int]] = {}
        self.watch = watch
        self._threads: list[threading.Thread] = []
        for src in sources:
            fut = backend.submit(variant, src)
            fut.add_done_callback(
                lambda _f, src=src: self.done_after.setdefault(src, time.monotonic() - self.t0)
            )
            self.futures[src] = fut
            if src in watch and scan:
                t = threading.Thread(target=self._watch, args=(src, watch[src]), daemon=True)
                t.start()
                self._threads.append(t)

    def _watch(self, src: str, marker: str) -> None:
        fut, seen = self.futures[src], 0
        while not fut.done() and time.monotonic() - self.t0 < RESULT_WAIT_S:
            seen = max(seen, len(host_pids_with(marker)))
            time.sleep(0.1)
        self.seen[src] = seen
        self.survivors[src] = wait_gone(marker)

    def result(self, source: str) -> tuple[EvalResult, float]:
        res = self.futures[source].result(timeout=RESULT_WAIT_S)
        for t in self._threads:
            t.join(GONE_WITHIN_S + 5)
        return res, self.done_after[source]

    def close(self) -> None:
        """Wait for every result (bounded) and kill anything a failed containment left behind."""
        for f in self.futures.values():
            try:
                f.result(timeout=RESULT_WAIT_S)
            except Exception:  # noqa: BLE001 - reported by the tests themselves
                pass
        for t in self._threads:
            t.join(GONE_WITHIN_S + 5)
        for marker in self.watch.values():
            kill_marked(marker)


class AbstractUnixServer:
    """A listener on a host abstract unix socket (reachable only from the host network namespace)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind("\0" + name)
        self.sock.listen(4)

    def close(self) -> None:
        self.sock.close()


# -- candidate programs --------------------------------------------------------------------------
HONEST = program(
    """
    def probe():
        return {"alpha": 1.5, "beta": -2.0, "gamma": 0.0}
    """
)

SLEEP_FOREVER = program(
    """
    import time

    def probe():
        while True:
            time.sleep(1)
    """
)

CPU_HOG = program(
    """
    def probe():
        x = 0
        while True:
            x = (x * 1103515245 + 12345) & 0xFFFFFFFF
    """
)

# Answers with a frame header, then trickles the body one byte at a time (each byte well within any
# per-read timeout) for TRICKLE_S seconds, then goes silent: the deadline must still hold.
TRICKLE = program(
    """
    import os
    import socket
    import stat
    import struct
    import time

    def probe():
        socks = []
        for fd in range(3, 256):
            try:
                if stat.S_ISSOCK(os.fstat(fd).st_mode):
                    socks.append(socket.socket(fileno=os.dup(fd)))
            except OSError:
                pass
        for s in socks:
            s.sendall(struct.pack("!Q", 1 << 20))
        end = time.monotonic() + TRICKLE_S
        while time.monotonic() < end:
            for s in socks:
                s.sendall(b"x")
            time.sleep(0.5)
        while True:
            time.sleep(1)
    """,
    TRICKLE_S=7.5,
)

# Spawns six marked processes five different ways, waits until they are all visible in the
# sandbox's /proc, then either returns how many are alive or sleeps forever.
_GRANDCHILDREN = """
import ctypes
import os
import signal
import subprocess
import sys
import time

SLEEPER = (
    "import signal, time\\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\\n"
    "signal.signal(signal.SIGHUP, signal.SIG_IGN)\\n"
    "time.sleep(1000)\\n"
)


def _marked():
    n = 0
    needle = MARKER.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        for f in ("cmdline", "comm", "environ"):
            try:
                with open(f"/proc/{name}/{f}", "rb") as fh:
                    if needle in fh.read():
                        n += 1
                        break
            except OSError:
                pass
    return n


def _spawn():
    # 1. plain child with the marker in argv
    subprocess.Popen([sys.executable, "-c", SLEEPER, MARKER])
    # 2. child in its own session, marker only in its environment
    subprocess.Popen(
        [sys.executable, "-c", SLEEPER], env={"EVO_MARK": MARKER}, start_new_session=True
    )
    # 3. bare fork, marker as the process name
    if os.fork() == 0:
        try:
            ctypes.CDLL(None).prctl(15, MARKER.encode(), 0, 0, 0)  # PR_SET_NAME
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        finally:
            os._exit(0)
    # 4. classic double-fork daemon (setsid, intermediate exits, grandchild re-parented)
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
            if os.fork() == 0:
                os.execv(sys.executable, [sys.executable, "-c", SLEEPER, MARKER, "daemon"])
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    # 5. a grandchild of a grandchild
    subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\\n"
         "subprocess.Popen([sys.executable, '-c', sys.argv[1], sys.argv[2], 'deep'])\\n"
         "time.sleep(1000)\\n",
         SLEEPER, MARKER],
        start_new_session=True,
    )
    deadline = time.monotonic() + 5
    while _marked() < EXPECTED and time.monotonic() < deadline:
        time.sleep(0.05)
    return _marked()
"""
GRANDCHILDREN_EXPECTED = 6

GRANDCHILDREN_THEN_SLEEP = (
    _GRANDCHILDREN
    + """

def probe():
    _spawn()
    while True:
        time.sleep(1)
"""
)

GRANDCHILDREN_THEN_RETURN = (
    _GRANDCHILDREN
    + """

def probe():
    return {"alive": float(_spawn())}
"""
)

MEMORY_HOG = program(
    """
    def probe():
        block = bytearray(4 << 30)
        return {"allocated": float(len(block))}
    """
)

MEMORY_HOG_NUMPY = program(
    """
    import numpy as np

    def probe():
        a = np.ones(4 << 30, dtype=np.uint8)
        return {"allocated": float(a.sum())}
    """
)

MEMORY_HOG_CHUNKS = program(
    """
    def probe():
        keep = []
        for _ in range(4096):  # 4 GiB in touched 1 MiB chunks
            keep.append(b"x" * (1 << 20))
        return {"allocated": float(len(keep))}
    """
)

RESERVE_ADDRESS_SPACE = program(
    """
    import mmap

    def probe():
        # 16 GiB of address space reserved but inaccessible (what CUDA libraries do at import),
        # plus 16 MiB really written: a limit on reservations would refuse this.
        reserved = mmap.mmap(-1, 16 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, prot=0)  # PROT_NONE
        used = bytearray(16 << 20)
        for i in range(0, len(used), 4096):
            used[i] = 1
        return {"reserved_gib": float(len(reserved) >> 30), "used_mib": float(sum(used) >> 8)}
    """
)

WRITE_PAST_LIMIT = program(
    """
    import mmap

    def probe():
        # Touch anonymous pages 64 MiB at a time until 4 GiB: far beyond a 1 GiB limit.
        keep = []
        for _ in range(64):
            m = mmap.mmap(-1, 64 << 20, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            for i in range(0, 64 << 20, 4096):
                m[i] = 1
            keep.append(m)
        return {"touched_mib": float(64 * len(keep))}
    """
)

OUTPUT_FLOOD = program(
    """
    import sys

    def probe():
        chunk = b"." * 1023 + b"\\n"
        for _ in range(50 * 1024):  # 50 MiB per stream
            sys.stdout.buffer.write(chunk)
            sys.stderr.buffer.write(chunk)
        sys.stdout.buffer.write(("END-OUT-" + MARKER + "\\n").encode())
        sys.stderr.buffer.write(("END-ERR-" + MARKER + "\\n").encode())
        sys.stdout.flush()
        sys.stderr.flush()
        return {"written": 50.0}
    """,
    MARKER="flood-marker-3f9a",
)

SECRETS = program(
    """
    import os
    import re

    NAME = re.compile("KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL", re.I)

    def _scan(blob):
        return sum(
            1
            for item in blob.split(b"\\0")
            if b"secret" in item.lower() or NAME.search(item.split(b"=")[0].decode("latin-1"))
        )

    def probe():
        env = sum(1 for k, v in os.environ.items() if "secret" in v.lower() or NAME.search(k))
        proc = 0
        pids = {"1", "self", str(os.getppid())}
        try:
            pids.update(p for p in os.listdir("/proc") if p.isdigit())
        except OSError:
            pass
        for pid in pids:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    proc += _scan(f.read())
            except OSError:
                pass
        return {"env": float(env), "proc_environ": float(proc)}
    """
)
SECRET_VARS = {
    "OPENAI_API_KEY": "sk-test-secret",
    "HF_TOKEN": "hf_test_secret_token",
    "AWS_SECRET_ACCESS_KEY": "aws-test-secret-key",
    "MY_PASSWORD": "hunter2-secret",
}

NETWORK = """
import socket

def probe():
    ok = 0
    for addr in (("1.1.1.1", 53), ("127.0.0.1", PORT)):
        try:
            socket.create_connection(addr, timeout=2).close()
            ok += 1
        except OSError:
            pass
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect("\\0" + ABSTRACT)
        s.close()
        ok += 1
    except OSError:
        pass
    return {"connected": float(ok)}
"""

FILES = """
import os

def _read(path):
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
        return 1
    except OSError:
        return 0

def _write(path):
    try:
        with open(path, "w") as f:
            f.write("ok")
        with open(path) as f:
            return int(f.read() == "ok")
    except OSError:
        return 0

def probe():
    reads = {p: _read(p) for p in TARGETS}
    out = {"reads": float(sum(reads.values()))}
    out["write_cwd"] = float(_write(os.path.join(os.getcwd(), "scratch-file")))
    out["write_tmp"] = float(_write("/tmp/scratch-file"))
    return out
"""

UID = program(
    """
    import os

    def probe():
        cap = 0
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    cap = int(line.split()[1], 16)
        return {
            "uid": float(os.getuid()),
            "euid": float(os.geteuid()),
            "gid": float(os.getgid()),
            "root_group": float(0 in os.getgroups()),
            "cap_eff_nonzero": float(cap != 0),
        }
    """
)

# Shared by the planting candidate and the checking candidates of the isolation check. Planted in
# every place a candidate can write: its cwd, the zygote's cwd (the cwd's parent), /sandbox, /tmp,
# /dev/shm (files, mode-000 files and directories, a fifo, a socket file, a symlink, a tree deeper
# than PATH_MAX and the recursion limit with a mode-000 bottom), user xattrs on the scratch roots,
# SysV shm / semaphore / message queue with a fixed key, a POSIX message queue, and the zygote's
# own nice value, open-file limit and CPU affinity (inherited by every later child).
_LEAK_CHECK = """
import ctypes
import json
import os
import resource
import socket
import subprocess
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
KEY = int(MARKER[3:10], 16)
MQ = ("/" + MARKER).encode()
XATTR = "user.evoleak"
DEPTH = 1500


def _walked():
    return {os.getcwd(), os.path.dirname(os.getcwd()), "/sandbox", os.path.expanduser("~")}


def _listed():
    return {"/tmp", "/dev/shm"}


def _names(root, walk):
    found = 0
    try:
        for dirpath, dirs, names in os.walk(root) if walk else [(root, [], os.listdir(root))]:
            found += sum(1 for n in dirs + names if MARKER in n)
            dirs[:] = [d for d in dirs if MARKER not in d]
    except OSError:
        pass
    return found


def _state():
    return {
        "state_nice": float(os.getpriority(os.PRIO_PROCESS, 0)),
        "state_nofile": float(resource.getrlimit(resource.RLIMIT_NOFILE)[0]),
        "state_cpus": float(len(os.sched_getaffinity(0))),
    }


def _check():
    files = sum(_names(d, True) for d in _walked()) + sum(_names(d, False) for d in _listed())
    xattr = 0
    for d in _walked() | _listed():
        try:
            xattr += os.getxattr(d, XATTR) == MARKER.encode()
        except OSError:
            pass
    mq = libc.mq_open(MQ, os.O_RDONLY)
    if mq >= 0:
        libc.mq_close(mq)
    import numpy
    modules = sum(
        1 for m in (json, sys, os, numpy) if getattr(m, "EVO_LEAK", None) == MARKER
    )
    env = sum(1 for v in os.environ.values() if MARKER in v)
    procs = 0
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            for f in ("cmdline", "comm", "environ"):
                try:
                    with open(f"/proc/{name}/{f}", "rb") as fh:
                        if MARKER.encode() in fh.read():
                            procs += 1
                            break
                except OSError:
                    pass
    return {
        "files": float(files),
        "xattr": float(xattr),
        "sysv_shm": float(libc.shmget(KEY, 0, 0) >= 0),
        "sysv_sem": float(libc.semget(KEY, 0, 0) >= 0),
        "sysv_msg": float(libc.msgget(KEY, 0) >= 0),
        "mqueue": float(mq >= 0),
        "modules": float(modules),
        "env": float(env),
        "procs": float(procs),
        **_state(),
    }
"""

LEAK_PLANT = (
    _LEAK_CHECK
    + """

def _try(fn, *args):
    try:
        fn(*args)
        return 1
    except OSError:
        return 0


def _socket_file(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.close()


def _locked_file(path):
    with open(path, "w") as f:
        f.write(MARKER)
    os.chmod(path, 0)


def _locked_dir(path):
    os.mkdir(path)
    with open(os.path.join(path, "secret"), "w") as f:
        f.write(MARKER)
    os.chmod(path, 0)


def _deep_tree(path):
    os.mkdir(path)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):  # 13 KB of path: past PATH_MAX and past Python's recursion limit
        os.mkdir("dddddddd", dir_fd=fd)
        inner = os.open("dddddddd", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = inner
    with open(os.open("secret", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
        f.write(MARKER)
    os.fchmod(fd, 0)
    os.close(fd)


def _sysv():
    shm = libc.shmget(KEY, 4096, 0o1000)  # IPC_CREAT, mode 000
    sem = libc.semget(KEY, 1, 0o1600)
    if sem >= 0:
        libc.semctl(sem, 0, 16, 42)  # SETVAL
    msg = libc.msgget(KEY, 0o1600)
    if msg >= 0:
        buf = ctypes.create_string_buffer(8 + len(MARKER))
        ctypes.memmove(ctypes.addressof(buf), ctypes.byref(ctypes.c_long(1)), 8)
        ctypes.memmove(ctypes.addressof(buf) + 8, MARKER.encode(), len(MARKER))
        libc.msgsnd(msg, buf, len(MARKER), 0o4000)  # IPC_NOWAIT
    return shm >= 0, sem >= 0, msg >= 0


def _zygote_state():
    # The parent is the zygote in warm mode (same uid: allowed); in cold mode it is not ours.
    parent, done = os.getppid(), 0
    done += _try(os.setpriority, os.PRIO_PROCESS, parent, min(19, os.getpriority(os.PRIO_PROCESS, 0) + 5))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    done += _try(resource.prlimit, parent, resource.RLIMIT_NOFILE, (soft - 7, hard))
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1:
        done += _try(os.sched_setaffinity, parent, cpus[:1])
    return done


def probe():
    before = {k + "_before": v for k, v in _state().items()}
    planted = 0
    for d in sorted(_walked() | _listed()):
        if not os.access(d, os.W_OK):
            continue
        base = os.path.join(d, "leak-" + MARKER)
        planted += _try(_locked_file, base + "-file")
        planted += _try(_locked_dir, base + "-locked")
        planted += _try(os.mkfifo, base + "-fifo")
        planted += _try(_socket_file, base + "-sock")
        planted += _try(os.symlink, "/", base + "-link")
        planted += _try(_deep_tree, base + "-tree")
    xattrs = sum(_try(os.setxattr, d, XATTR, MARKER.encode()) for d in _walked() | _listed())
    mq = libc.mq_open(MQ, os.O_CREAT | os.O_RDWR, 0o600, None)
    shm, sem, msg = _sysv()
    state = _zygote_state()
    import numpy
    for m in (json, sys, os, numpy):
        m.EVO_LEAK = MARKER
    os.environ["EVO_LEAK"] = MARKER
    subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(1000)", MARKER], start_new_session=True
    )
    deadline = time.monotonic() + 5
    while _check()["procs"] < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    return {
        **_check(),
        **before,
        "planted_files": float(planted),
        "planted_xattr": float(xattrs),
        "planted_sysv": float(shm + sem + msg),
        "planted_mqueue": float(mq >= 0),
        "planted_state": float(state),
    }
"""
)

LEAK_CHECK = (
    _LEAK_CHECK
    + """

def probe():
    return _check()
"""
)

EXIT_3 = program(
    """
    import os

    def probe():
        os._exit(3)
    """
)

SIGKILL_SELF = program(
    """
    import os

    def probe():
        os.kill(os.getpid(), 9)
    """
)

RAISES = program(
    """
    def probe():
        raise ValueError("probe refuses")
    """
)

SYNTAX_ERROR = "def probe(:\n    return {}\n"

RAISES_AT_IMPORT = "import math\nLIMIT = math.sqrt(4)\nraise RuntimeError('refused at import')\n"

HARNESS_FRAMES = ("importlib", "<frozen", "harness/", "serve.py", "zygote.py")
"""What a candidate's load error must not show: the loading machinery's frames."""

NO_PROBE = program(
    """
    def not_the_probe():
        return {"x": 1.0}
    """
)

RETURNS_NAN = program(
    """
    def probe():
        return {"x": float("nan")}
    """
)

RETURNS_LIST = program(
    """
    def probe():
        return [1.0, 2.0]
    """
)

RETURNS_LAMBDA = program(
    """
    def probe():
        return {"x": lambda: 1.0}
    """
)

# Writes bytes straight into every socket the candidate holds (its reply channel), then either
# returns normally (the real reply then follows the garbage) or hangs.
_MALICIOUS = """
import os
import socket
import stat
import struct
import time

def _sockets():
    out = []
    for fd in range(3, 256):
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                out.append(socket.socket(fileno=os.dup(fd)))
        except OSError:
            pass
    return out

def _garbage():
    if KIND == "huge":
        return b"\\xff" * 64
    if KIND == "junk":
        return struct.pack("!Q", 16) + b"\\x00\\x00\\x00\\x0c{not json!!}"
    if KIND == "forged":  # well-framed, but the header smuggles a disallowed dtype
        header = (
            b'{"tree": {"__dict__": {"type": "result", "value": {"__nd__": 0, "dtype": "|O",'
            b' "shape": [1], "torch": false}}}, "sizes": [8]}'
        )
        body = struct.pack("!I", len(header)) + header + b"\\x00" * 8
        return struct.pack("!Q", len(body)) + body
    if KIND == "deep":  # well-framed, but nested deeper than any JSON parser allows
        header = b'{"tree": ' + b"[" * 200000 + b"]" * 200000 + b', "sizes": []}'
        body = struct.pack("!I", len(header)) + header
        return struct.pack("!Q", len(body)) + body
    if KIND == "shape":  # well-framed, but the shape's element count wraps around in int64
        header = (
            b'{"tree": {"__nd__": 0, "dtype": "|u1", "shape": [4611686018427387904, 4],'
            b' "torch": false}, "sizes": [0]}'
        )
        body = struct.pack("!I", len(header)) + header
        return struct.pack("!Q", len(body)) + body
    raise AssertionError(KIND)

def probe():
    socks = _sockets()
    for s in socks:
        try:
            s.sendall(_garbage())
        except OSError:
            pass
    if HANG:
        while True:
            time.sleep(1)
    return {"sockets": float(len(socks))}
"""

FORK_BOMB = """
import ctypes
import os
import time

def probe():
    n = 0
    for _ in range(500):
        try:
            pid = os.fork()
        except OSError:
            continue
        if pid == 0:
            try:
                ctypes.CDLL(None).prctl(15, MARKER.encode(), 0, 0, 0)
                time.sleep(1000)
            finally:
                os._exit(0)
        n += 1
    return {"forked": float(n)}
"""

BIG_FILE = program(
    """
    import os
    import signal

    def _write(path, mib):
        try:
            with open(path, "wb") as f:
                block = b"\\0" * (1 << 20)
                for _ in range(mib):
                    f.write(block)
            ok = 1
        except OSError:
            ok = 0
        try:
            size = os.path.getsize(path)
            os.unlink(path)
        except OSError:
            size = 0
        return ok, size

    def probe():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # get EFBIG instead of dying
        small_ok, _ = _write(os.path.join(os.getcwd(), "small.bin"), 1)
        big_cwd, size_cwd = _write(os.path.join(os.getcwd(), "big.bin"), 100)
        big_tmp, size_tmp = _write("/tmp/big.bin", 100)
        return {
            "small_ok": float(small_ok),
            "big_ok": float(big_cwd or big_tmp),
            "max_size": float(max(size_cwd, size_tmp)),
        }
    """
)

# Does not handle the failure: SIGXFSZ (ignored by CPython, fatal to most programs) or EFBIG.
BIG_FILE_UNCAUGHT = program(
    """
    import os

    def probe():
        with open(os.path.join(os.getcwd(), "big.bin"), "wb") as f:
            block = b"\\0" * (1 << 20)
            for _ in range(100):
                f.write(block)
                f.flush()
        return {"big_ok": 1.0}
    """
)


DISK_LOCATIONS = ("cwd", "/tmp", "/dev/shm")
"""Where a candidate can write: its working directory (``/sandbox``), ``/tmp`` and ``/dev/shm``."""
DISK_FILL_MIB = 2048
"""What the disk-filling probe tries to write: far past any backend's quota for the selftest."""
DISK_SLACK = 64 * 1024 * 1024
"""Host free-disk noise allowed on top of the quota (other processes write too)."""
DISK_FILL = program(
    """
    import os

    def probe():
        where = os.getcwd() if WHERE == "cwd" else WHERE
        block = b"\\1" * (1 << 20)
        for i in range(MIB // 4):  # files of 4 MiB, under the per-file limit
            with open(os.path.join(where, f"fill-{os.getpid()}-{i}.bin"), "wb") as f:
                for _ in range(4):
                    f.write(block)
        return {"written_mib": float(MIB)}
    """
)


class DiskWatch:
    """Samples a host directory's free space in a thread; ``drop`` is the largest fall seen."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.drop = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _free(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def _watch(self) -> None:
        while not self._stop.is_set():
            self.drop = max(self.drop, self._start - self._free())
            self._stop.wait(0.005)

    def __enter__(self) -> DiskWatch:
        self._start = self._free()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def indexed(i: int) -> str:
    """An honest probe that reports its index."""
    return program(
        """
        def probe():
            return {"index": float(INDEX)}
        """,
        INDEX=i,
    )


# -- the suite ---------------------------------------------------------------------------------
class SandboxConformance:
    """Checks every backend must pass; subclasses provide ``backend`` and ``make_backend``."""

    processes_visible_on_host: ClassVar[bool] = True
    """Whether sandboxed processes appear in this host's ``/proc`` (false for remote backends)."""
    supports_env_root: ClassVar[bool] = True
    """Whether ``make_backend(env_root=...)`` is supported (loads another environments root)."""
    trusted_side_inherits_env: ClassVar[bool] = True
    """Whether the backend's trusted processes inherit the host environment (false for containers,
    whose trusted side never sees it: the positive control then cannot apply)."""

    # -- fixtures / hooks ----------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def backend(cls) -> Iterator[Sandbox]:  # pragma: no cover - always overridden
        raise NotImplementedError("subclasses provide a class- or module-scoped `backend` fixture")

    def make_backend(self, **overrides: Any) -> Sandbox:  # pragma: no cover - always overridden
        """A fresh backend of the kind under test (``workers``, ``env_root`` may be overridden)."""
        raise NotImplementedError

    @pytest.fixture
    def variant(self) -> Variant:
        return default_registry().get(ENV_ID)

    @pytest.fixture(scope="class")
    @classmethod
    def timeout_batch(cls, backend: Sandbox) -> Iterator[TimeoutBatch]:
        """The slow candidates, submitted together so backends with several workers overlap them."""
        marker = new_marker()
        grandchildren = program(GRANDCHILDREN_THEN_SLEEP, MARKER=marker, EXPECTED=GRANDCHILDREN_EXPECTED)
        batch = TimeoutBatch(
            backend,
            default_registry().get(ENV_ID),
            [TRICKLE, grandchildren, SLEEP_FOREVER, CPU_HOG],
            watch={grandchildren: marker},
            scan=cls.processes_visible_on_host,
        )
        try:
            yield batch
        finally:
            batch.close()

    @pytest.fixture(scope="class")
    @classmethod
    def single_backend(cls) -> Iterator[Sandbox]:
        """A fresh one-worker backend whose trusted processes were started with secrets in their env."""
        with pytest.MonkeyPatch.context() as mp:
            for k, v in SECRET_VARS.items():
                mp.setenv(k, v)
            backend = cls().make_backend(workers=1)
            try:
                # Start the workers (and any warm sandbox) while the secrets are in the environment.
                first = cls.evaluate(backend, default_registry().get(ENV_ID), HONEST)
            except BaseException:
                backend.close()
                raise
        try:
            assert first.status is Status.OK, describe(first)
            yield backend
        finally:
            backend.close()

    # -- helpers -------------------------------------------------------------------------------
    @staticmethod
    def evaluate(backend: Sandbox, variant: Variant, source: str) -> EvalResult:
        """Evaluate with a hard upper bound, so a hung backend fails the test instead of hanging it."""
        res = backend.submit(variant, source).result(timeout=RESULT_WAIT_S)
        assert isinstance(res, EvalResult)
        return res

    def assert_recovers(self, backend: Sandbox, variant: Variant) -> None:
        """The backend still evaluates an honest program correctly."""
        res = self.evaluate(backend, variant, HONEST)
        assert res.status is Status.OK, "backend did not recover: " + describe(res)
        assert res.metrics == {"alpha": 1.5, "beta": -2.0, "gamma": 0.0, "score": 1.0}

    def assert_contained(self, marker: str) -> None:
        """No host process carrying ``marker`` survives (killed if the check fails)."""
        if not self.processes_visible_on_host:
            return
        survivors = wait_gone(marker)
        if survivors:
            info = {p: _cmdline(p) for p in survivors[:5]}
            kill_marked(marker)
            pytest.fail(f"{len(survivors)} sandboxed processes survived the evaluation: {info}")

    # 1 -----------------------------------------------------------------------------------------
    def test_honest_probe(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, HONEST)
        assert res.status is Status.OK, describe(res)
        assert res.score == 1.0
        assert res.metrics == {"alpha": 1.5, "beta": -2.0, "gamma": 0.0, "score": 1.0}
        assert res.reason == ""
        assert res.env_id == variant.id and res.env_hash == variant.hash
        assert res.attempts == 1
        assert res.backend == backend.name

    def test_initial_program_scores(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, variant.initial_program)
        assert res.status is Status.OK, describe(res)
        assert res.metrics == {"answer": 42.0, "score": 1.0}

    # 2 -----------------------------------------------------------------------------------------
    def check_timeout(self, batch: TimeoutBatch, source: str, variant: Variant) -> EvalResult:
        """The batch's result for ``source`` is a timeout, reported within timeout + slack."""
        res, done_after = batch.result(source)
        assert res.status is Status.TIMEOUT, describe(res)
        assert res.score is None and res.metrics == {}
        total = res.durations.total
        assert total <= variant.timeout_s + SLACK_S, f"timeout reported after {total:.1f} s: " + describe(res)
        assert total >= variant.timeout_s * 0.5, f"timeout reported early, after {total:.1f} s"
        # Wall clock from submission, allowing the batch to run one job at a time.
        assert done_after <= len(batch.futures) * (variant.timeout_s + SLACK_S), f"{done_after:.1f} s"
        return res

    @pytest.mark.slow
    def test_timeout_sleep_forever(self, timeout_batch: TimeoutBatch, variant: Variant) -> None:
        self.check_timeout(timeout_batch, SLEEP_FOREVER, variant)

    # 4 -----------------------------------------------------------------------------------------
    @pytest.mark.slow
    def test_cpu_hog_times_out(self, timeout_batch: TimeoutBatch, variant: Variant) -> None:
        self.check_timeout(timeout_batch, CPU_HOG, variant)

    @pytest.mark.slow
    def test_trickled_reply_times_out(self, timeout_batch: TimeoutBatch, variant: Variant) -> None:
        self.check_timeout(timeout_batch, TRICKLE, variant)

    @pytest.mark.slow
    def test_recovers_after_timeouts(
        self, timeout_batch: TimeoutBatch, backend: Sandbox, variant: Variant
    ) -> None:
        for src in timeout_batch.futures:
            timeout_batch.result(src)
        self.assert_recovers(backend, variant)

    @pytest.mark.slow
    def test_grandchildren_killed_on_timeout(self, timeout_batch: TimeoutBatch, variant: Variant) -> None:
        ((source, marker),) = timeout_batch.watch.items()
        self.check_timeout(timeout_batch, source, variant)
        if self.processes_visible_on_host:
            # Positive control: all of them were alive (seen from the host) before the timeout.
            seen = timeout_batch.seen[source]
            assert seen == GRANDCHILDREN_EXPECTED, f"the probe had {seen} marked processes running"
            survivors = timeout_batch.survivors[source]
            assert not survivors, f"{len(survivors)} sandboxed processes survived the timeout"
        self.assert_contained(marker)

    def test_grandchildren_killed_after_return(self, backend: Sandbox, variant: Variant) -> None:
        marker = new_marker()
        source = program(GRANDCHILDREN_THEN_RETURN, MARKER=marker, EXPECTED=GRANDCHILDREN_EXPECTED)
        try:
            res = self.evaluate(backend, variant, source)
        except BaseException:
            kill_marked(marker)
            raise
        try:
            assert res.status is Status.OK, describe(res)
            assert res.metrics["alive"] == GRANDCHILDREN_EXPECTED, "positive control: " + describe(res)
        finally:
            self.assert_contained(marker)
        self.assert_recovers(backend, variant)

    # 3 -----------------------------------------------------------------------------------------
    @pytest.mark.parametrize(
        "source", [MEMORY_HOG, MEMORY_HOG_NUMPY, MEMORY_HOG_CHUNKS], ids=["bytearray", "numpy", "chunks"]
    )
    def test_memory_limit(self, backend: Sandbox, variant: Variant, source: str) -> None:
        assert variant.hardware.memory_mb < 4096
        res = self.evaluate(backend, variant, source)
        assert res.status is Status.ERROR, describe(res)
        self.assert_recovers(backend, variant)

    def test_address_space_reservation_is_not_memory(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, RESERVE_ADDRESS_SPACE)
        assert res.status is Status.OK, describe(res)
        assert res.metrics["reserved_gib"] == 16.0 and res.metrics["used_mib"] == 16.0

    @pytest.mark.parametrize("source", [WRITE_PAST_LIMIT, MEMORY_HOG], ids=["mmap-touch", "bytearray"])
    def test_memory_error_names_the_limit(self, backend: Sandbox, variant: Variant, source: str) -> None:
        res = self.evaluate(backend, variant, source)
        assert res.status is Status.ERROR, describe(res)
        assert f"memory limit {variant.hardware.memory_mb} MiB" in res.reason, describe(res)
        self.assert_recovers(backend, variant)

    # 5 -----------------------------------------------------------------------------------------
    def test_output_flood_is_capped(self, backend: Sandbox, variant: Variant) -> None:
        cap = variant.hardware.output_kb * 1024 + 1024
        res = self.evaluate(backend, variant, OUTPUT_FLOOD)
        assert res.status is Status.OK, describe(res)
        assert res.metrics["written"] == 50.0
        assert len(res.stdout_tail.encode()) <= cap, len(res.stdout_tail)
        assert len(res.stderr_tail.encode()) <= cap, len(res.stderr_tail)
        assert res.stdout_tail.rstrip("\n").endswith("END-OUT-flood-marker-3f9a"), res.stdout_tail[-200:]
        assert res.stderr_tail.rstrip("\n").endswith("END-ERR-flood-marker-3f9a"), res.stderr_tail[-200:]
        assert "END-ERR" not in res.stdout_tail and "END-OUT" not in res.stderr_tail

    # 6 -----------------------------------------------------------------------------------------
    def test_secrets_not_visible(
        self, single_backend: Sandbox, variant: Variant, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        for k, v in SECRET_VARS.items():
            monkeypatch.setenv(k, v)
        # Positive controls: the probe does find the secrets on the host, and the backend's own
        # trusted processes really hold them.
        assert run_locally(SECRETS)["env"] >= len(SECRET_VARS)
        if self.processes_visible_on_host and self.trusted_side_inherits_env:
            assert host_pids_with(SECRET_VARS["OPENAI_API_KEY"]), "no trusted process holds the secrets"
        res = self.evaluate(single_backend, variant, SECRETS)
        assert res.status is Status.OK, describe(res)
        assert res.metrics["env"] == 0, describe(res)
        assert res.metrics["proc_environ"] == 0, describe(res)

    # 7 -----------------------------------------------------------------------------------------
    def test_no_network(self, backend: Sandbox, variant: Variant) -> None:
        tcp = TcpServer()
        unix = AbstractUnixServer(new_marker())
        try:
            source = program(NETWORK, PORT=tcp.port, ABSTRACT=unix.name)
            res = self.evaluate(backend, variant, source)
            time.sleep(0.3)
            assert res.status is Status.OK, describe(res)
            assert res.metrics["connected"] == 0, describe(res)
            assert tcp.accepted == 0, "the host TCP server accepted a sandboxed connection"
            # Positive control: the same probe does reach both servers from the host.
            assert run_locally(source)["connected"] >= 2
        finally:
            tcp.close()
            unix.close()

    # 8 -----------------------------------------------------------------------------------------
    def test_host_files_hidden(self, backend: Sandbox, variant: Variant, tmp_path: Path) -> None:
        planted = tmp_path / "planted-secret.txt"
        planted.write_text("sk-planted-secret")
        targets = [
            str(variant.family_dir / "scorer.py"),
            str(Path(__file__).resolve()),
            str(planted),
            str(tmp_path),
            "/work/shared/data",
            os.path.expanduser("~root/.cache"),
            "/etc/shadow",
        ]
        source = program(FILES, TARGETS=targets)
        local_reads = sum(1 for t in targets if os.access(t, os.R_OK))
        if os.geteuid() == 0:
            with contextlib.chdir(tmp_path):  # the probe also writes a file into its cwd
                assert run_locally(source)["reads"] == local_reads >= 5  # positive control
        res = self.evaluate(backend, variant, source)
        assert res.status is Status.OK, describe(res)
        assert res.metrics["reads"] == 0, describe(res)
        assert res.metrics["write_cwd"] == 1, "positive control: the cwd must be writable"
        assert res.metrics["write_tmp"] == 1, "positive control: /tmp must be writable"

    # 9 -----------------------------------------------------------------------------------------
    def test_unprivileged(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, UID)
        assert res.status is Status.OK, describe(res)
        if os.geteuid() == 0:
            assert res.metrics["uid"] != 0 and res.metrics["euid"] != 0, describe(res)
            assert res.metrics["gid"] != 0 and res.metrics["root_group"] == 0, describe(res)
        assert res.metrics["cap_eff_nonzero"] == 0, describe(res)

    # 10 ----------------------------------------------------------------------------------------
    def test_no_leaks_between_candidates(self, single_backend: Sandbox, variant: Variant) -> None:
        # One worker, so the checking candidates run where the planting one ran (same zygote).
        marker = new_marker()
        try:
            a = self.evaluate(single_backend, variant, program(LEAK_PLANT, MARKER=marker))
            survivors = wait_gone(marker) if self.processes_visible_on_host else []
            b = self.evaluate(single_backend, variant, program(LEAK_CHECK, MARKER=marker))
            c = self.evaluate(single_backend, variant, program(LEAK_CHECK, MARKER=marker))
        finally:
            kill_marked(marker)
        assert a.status is Status.OK, describe(a)
        m = a.metrics
        # Positive control: the leaks were really planted and the check detects them. A POSIX
        # message queue may be refused (then there is nothing to find); a user xattr needs a file
        # system and a scratch root that allow it.
        assert m["planted_files"] >= 6 * 3 and m["files"] >= m["planted_files"], describe(a)
        assert m["planted_sysv"] == 3, describe(a)
        assert m["sysv_shm"] == m["sysv_sem"] == m["sysv_msg"] == 1, describe(a)
        assert m["mqueue"] == m["planted_mqueue"] and m["xattr"] == m["planted_xattr"], describe(a)
        assert m["modules"] == 4, describe(a)
        assert m["env"] >= 1, describe(a)
        assert m["procs"] >= 1, describe(a)
        assert not survivors, f"background processes of the previous candidate survived: {survivors}"
        for r in (b, c):
            assert r.status is Status.OK, describe(r)
            leaks = {k: v for k, v in r.metrics.items() if k != "score" and not k.startswith("state_") and v}
            assert not leaks, f"state leaked from the previous candidate: {leaks}"
            # The zygote's nice value, limits and affinity, inherited by each child, are as before.
            changed = {k: v for k, v in r.metrics.items() if k.startswith("state_") and v != m[k + "_before"]}
            assert not changed, f"the previous candidate changed what the next one inherits: {changed}"

    # 11 ----------------------------------------------------------------------------------------
    def test_crash_exit(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, EXIT_3)
        assert res.status is Status.ERROR, describe(res)
        assert re.search(r"exit|ended|died", res.reason, re.I), describe(res)
        self.assert_recovers(backend, variant)

    def test_crash_sigkill(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, SIGKILL_SELF)
        assert res.status is Status.ERROR, describe(res)
        assert res.reason, describe(res)
        self.assert_recovers(backend, variant)

    def test_crash_raises(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, RAISES)
        assert res.status is Status.ERROR, describe(res)
        assert "ValueError" in res.reason and "probe refuses" in res.reason, describe(res)

    def test_crash_syntax_error(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, SYNTAX_ERROR)
        assert res.status is Status.ERROR, describe(res)
        assert "SyntaxError" in res.reason and "def probe(:" in res.reason, describe(res)
        assert "line 1" in res.reason and not any(h in res.reason for h in HARNESS_FRAMES), describe(res)

    def test_crash_at_import_shows_own_frames(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, RAISES_AT_IMPORT)
        assert res.status is Status.ERROR, describe(res)
        assert "RuntimeError: refused at import" in res.reason, describe(res)
        assert "line 3, in <module>" in res.reason and "raise RuntimeError(" in res.reason, describe(res)
        assert not any(h in res.reason for h in HARNESS_FRAMES), describe(res)

    def test_crash_missing_probe(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, NO_PROBE)
        assert res.status is Status.ERROR, describe(res)
        assert "probe" in res.reason, describe(res)

    # 12 ----------------------------------------------------------------------------------------
    def test_invalid_nan(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, RETURNS_NAN)
        assert res.status is Status.INVALID, describe(res)
        assert "not finite" in res.reason, describe(res)
        assert res.score is None and res.metrics == {}

    def test_invalid_not_a_dict(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, RETURNS_LIST)
        assert res.status is Status.INVALID, describe(res)
        assert "dict" in res.reason, describe(res)

    def test_unencodable_return_value(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, RETURNS_LAMBDA)
        assert res.status is Status.ERROR, describe(res)
        assert "function" in res.reason, describe(res)
        self.assert_recovers(backend, variant)

    # 13 ----------------------------------------------------------------------------------------
    @pytest.mark.parametrize(
        ("kind", "hang"),
        [("huge", False), ("junk", True), ("forged", False), ("deep", False), ("shape", True)],
    )
    def test_malicious_reply(self, backend: Sandbox, variant: Variant, kind: str, hang: bool) -> None:
        res = self.evaluate(backend, variant, program(_MALICIOUS, KIND=kind, HANG=hang))
        assert res.status in (Status.ERROR, Status.TIMEOUT), describe(res)
        self.assert_recovers(backend, variant)

    # 14 ----------------------------------------------------------------------------------------
    def test_fork_bomb(self, backend: Sandbox, variant: Variant) -> None:
        marker = new_marker()
        try:
            res = self.evaluate(backend, variant, program(FORK_BOMB, MARKER=marker))
        except BaseException:
            kill_marked(marker)
            raise
        try:
            assert res.status is not Status.INFRA_ERROR, describe(res)
            if res.status is Status.OK:
                assert 1 <= res.metrics["forked"] < variant.hardware.pids, describe(res)
        finally:
            self.assert_contained(marker)
        self.assert_recovers(backend, variant)

    # 15 ----------------------------------------------------------------------------------------
    def test_file_size_limit(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, BIG_FILE)
        if res.status is Status.OK:
            assert res.metrics["small_ok"] == 1, "positive control: a 1 MiB file must be writable"
            assert res.metrics["big_ok"] == 0, describe(res)
            assert res.metrics["max_size"] <= variant.hardware.file_mb * 1024 * 1024, describe(res)
        else:
            assert res.status is Status.ERROR, describe(res)

    def test_file_size_limit_uncaught(self, backend: Sandbox, variant: Variant) -> None:
        res = self.evaluate(backend, variant, BIG_FILE_UNCAUGHT)
        assert res.status is Status.ERROR, describe(res)
        self.assert_recovers(backend, variant)

    # 15b ---------------------------------------------------------------------------------------
    @pytest.mark.parametrize("where", DISK_LOCATIONS)
    def test_disk_quota(self, backend: Sandbox, variant: Variant, where: str) -> None:
        """Writing far past the disk quota in one writable location fails fast, and no host disk fills."""
        quota = variant.hardware.disk_mb * 1024 * 1024
        with DiskWatch(Path(tempfile.gettempdir())) as watch:
            res = self.evaluate(backend, variant, program(DISK_FILL, WHERE=where, MIB=DISK_FILL_MIB))
        assert res.status is Status.ERROR, describe(res)
        assert "disk quota" in res.reason and "No space left on device" in res.reason, describe(res)
        assert watch.drop <= quota + DISK_SLACK, f"host free disk dropped by {watch.drop >> 20} MiB"
        self.assert_recovers(backend, variant)

    # 16 ----------------------------------------------------------------------------------------
    def test_evaluate_many_in_order(self, backend: Sandbox, variant: Variant) -> None:
        results = backend.evaluate_many(variant, [indexed(i) for i in range(4)])
        assert len(results) == 4
        for i, res in enumerate(results):
            assert res.status is Status.OK, describe(res)
            assert res.metrics == {"index": float(i), "score": 1.0}

    def test_as_completed(self, backend: Sandbox, variant: Variant) -> None:
        sources = [indexed(i) for i in range(3)] + [RAISES]
        got = dict(backend.as_completed(variant, sources))
        assert sorted(got) == [0, 1, 2, 3]
        for i in range(3):
            assert got[i].metrics["index"] == i, describe(got[i])
        assert got[3].status is Status.ERROR

    # 17 ----------------------------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def broken_root(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        """An environments root whose family code is broken.

        ``selftest-tiny``: its ``scorer.py`` raises at import. ``selftestmissing-tiny`` (a copy of
        the family renamed ``selftestmissing``): its manifest names a scorer module that exists nowhere.
        """
        if not cls.supports_env_root:
            pytest.skip("backend does not load other environments roots")
        root = tmp_path_factory.mktemp("broken") / "envs"
        src = default_registry().get(ENV_ID).family_dir
        ignore = shutil.ignore_patterns("__pycache__")
        shutil.copytree(src, root / "selftest", ignore=ignore)
        scorer = root / "selftest" / "scorer.py"  # still defines ProbeScorer: the static check passes
        text = scorer.read_text()
        assert "\nclass ProbeScorer" in text
        scorer.write_text(
            text.replace(
                "\nclass ProbeScorer", "\nraise RuntimeError('scorer-import-broken')\nclass ProbeScorer"
            )
        )
        shutil.copytree(src, root / "selftestmissing", ignore=ignore)
        toml = root / "selftestmissing" / "env.toml"
        text = toml.read_text()
        for old, new in (
            ('name = "selftest"', 'name = "selftestmissing"'),
            ('"scorer:ProbeScorer"', '"no_such_scorer:ProbeScorer"'),
            ("[variants.selftest-tiny]", "[variants.selftestmissing-tiny]"),
        ):
            assert old in text
            text = text.replace(old, new)
        toml.write_text(text)
        return root

    def test_a_scorer_that_raises_on_import_is_an_environment_error(self, broken_root: Path) -> None:
        """Deterministic: retrying cannot help, and the candidate is not to blame."""
        registry = Registry(broken_root, strict=False)
        with self.make_backend(workers=1, env_root=str(broken_root)) as b:
            res = b.submit(registry.get("selftest-tiny"), HONEST).result(timeout=RESULT_WAIT_S)
        assert res.status is Status.INFRA_ERROR and not res.counts_against_candidate, describe(res)
        assert res.attempts == 1 and not res.retryable, describe(res)
        assert res.reason.startswith("environment error: family selftest"), describe(res)
        assert "scorer-import-broken" in res.reason
        assert str(broken_root / "selftest" / "scorer.py") in res.reason

    def test_a_missing_scorer_module_is_refused_when_the_registry_loads(self, broken_root: Path) -> None:
        registry = Registry(broken_root, strict=False)
        msg = str(registry.errors["selftestmissing"])
        assert "key 'family.scorer'" in msg
        assert str(broken_root / "selftestmissing" / "no_such_scorer.py") in msg
        with pytest.raises(UnknownIdError, match="manifest is broken"):
            registry.get("selftestmissing-tiny")
