"""Trusted-side handles on sandboxed processes: capped output capture, cold launch, warm zygote."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from harness.envs.manifest import Hardware
from harness.evaluation.errors import InfraError
from harness.inside import wire

from .isolation import (
    SANDBOX_WORKDIR,
    detect_isolation,
    kill_uid,
    preexec,
    rlimits,
    sandbox_command,
    sandbox_env,
    zygote_policy,
)
from .launch import SHIM_MODULE, module_argv
from .lifetime import tagged_tempdir
from .limits import CandidateMemory, CgroupError
from .limits.attach import attach_child

log = logging.getLogger(__name__)
READY_TIMEOUT_S = 60.0
_PRIVATE_SCRATCH = ("bwrap", "container")
"""Isolation levels whose zygotes wipe their own private tmpfs (no host scratch directory)."""
MAX_REPLY_HEADER = 16 * 1024 * 1024
"""Largest JSON header the trusted side parses from a candidate (arrays travel as raw buffers)."""
MAX_REPLY_BYTES = 64 * 1024 * 1024
"""Largest reply of a candidate call (the biggest legitimate one, EPLB's full log2phy of 58 x 256 x
288 int64, is 34 MB): a 480 MB reply once raised the trusted worker's peak RSS from 285 to 1,216 MB."""


class CappedReader:
    """Drains a pipe on a thread, keeping at most ``cap`` trailing bytes (the rest is counted)."""

    def __init__(self, stream: IO[bytes] | int, cap: int) -> None:
        self._fd = stream if isinstance(stream, int) else stream.fileno()
        self._file = None if isinstance(stream, int) else stream
        self.cap = cap
        self.buf = bytearray()
        self.total = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                chunk = os.read(self._fd, 1 << 16)
                if not chunk:
                    break
                self.total += len(chunk)
                self.buf += chunk
                if len(self.buf) > 2 * self.cap:
                    del self.buf[: len(self.buf) - self.cap]
        except OSError:
            pass
        finally:
            try:
                if self._file is not None:
                    self._file.close()
                else:
                    os.close(self._fd)
            except OSError:
                pass

    def tail(self, wait: float = 0.5) -> bytes:
        """The kept trailing bytes (waits briefly for the writer to finish)."""
        self._thread.join(wait)
        return bytes(self.buf[-self.cap :])

    @property
    def truncated(self) -> bool:
        """Whether output beyond the cap was discarded."""
        return self.total > self.cap


def kill_candidate_uid(uid: int) -> None:
    """Where candidates have a uid of their own but no PID namespace (containers), kill that uid."""
    if detect_isolation().level == "container":
        kill_uid(uid)


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL a process started with ``start_new_session`` and its whole group, then reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed process always exits
        pass


@dataclass
class CandidateConnection:
    """A live ``shim serve`` process: its socket and capped stdout / stderr."""

    sock: socket.socket
    """Request / reply socket."""
    stdout: CappedReader
    """Captured stdout."""
    stderr: CappedReader
    """Captured stderr."""
    proc: subprocess.Popen[bytes] | None = None
    """The process (cold mode); None for a zygote child."""
    closed: bool = field(default=False)
    """Whether it has been shut down."""

    def request(self, msg: Any, timeout: float) -> Any:
        """Send one request and wait for its reply.

        Raises:
            TimeoutError: No reply in time.
            EOFError: The process died or closed the socket.
            wire.WireError: The reply was malformed.
        """
        deadline = time.monotonic() + max(timeout, 1e-3)
        self.sock.settimeout(max(timeout, 1e-3))
        wire.send_message(self.sock, msg)
        return wire.recv_message(
            self.sock, deadline=deadline, max_header=MAX_REPLY_HEADER, max_bytes=MAX_REPLY_BYTES
        )

    def exit_info(self) -> str:
        """Describe how the process ended, if known."""
        if self.proc is None:
            return "the candidate process ended (exited or was killed)"
        try:
            rc = self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            return "the candidate process stopped answering"
        sig = -rc if rc < 0 else (rc - 128 if 128 < rc < 160 else 0)  # bwrap reports 128 + signal
        if sig:
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = str(sig)
            return f"the candidate process was killed by signal {name}"
        return f"the candidate process exited with code {rc}"


def _serve_argv() -> list[str]:
    return module_argv(SHIM_MODULE)


def _joining(memory: CandidateMemory | None, limits: dict[str, int]) -> Any:
    """``preexec_fn``: join the candidate's cgroup (before exec, so the whole tree is in it)."""
    apply = preexec(limits)
    if memory is None:
        return apply

    def _run() -> None:
        memory.join()
        apply()

    return _run


def launch_cold(
    hw: Hardware,
    uid: int,
    workdir: Path,
    output_cap: int,
    preload: tuple[str, ...] = (),
    memory: CandidateMemory | None = None,
) -> CandidateConnection:
    """Start a fresh sandboxed ``shim serve`` process (one per candidate).

    ``preload`` modules are imported before the process reports ready, so their import time is
    accounted as setup rather than as the candidate's first call. ``memory`` (the candidate's
    limit) is tightened once they are imported, so they are not charged to the candidate.

    Raises:
        InfraError: If the sandbox does not start or never reports ready.
    """
    parent, child = socket.socketpair()
    lim = rlimits(hw)
    lim.pop("RLIMIT_DATA", None)  # applied by the shim after the pre-imports
    headroom = memory.data_limit_bytes if memory is not None else None
    cmd = sandbox_command(
        [*_serve_argv(), "serve", str(child.fileno()), ",".join(preload), str(headroom or 0)],
        workdir=workdir,
        uid=uid,
        hw=hw,
        nproc=lim.get("RLIMIT_NPROC"),
    )
    try:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(child.fileno(),),
            env=sandbox_env(hw, uid),
            cwd=workdir,
            start_new_session=True,
            preexec_fn=_joining(memory, lim),
        )
    except (OSError, subprocess.SubprocessError) as e:
        raise InfraError(f"could not start the sandbox: {e}") from e
    finally:
        child.close()
    assert proc.stdout is not None and proc.stderr is not None
    conn = CandidateConnection(
        parent, CappedReader(proc.stdout, output_cap), CappedReader(proc.stderr, output_cap), proc
    )
    _await_ready(conn, lambda: kill_group(proc))
    if memory is not None:
        try:
            memory.started()
        except CgroupError as e:
            kill_group(proc)
            raise InfraError(str(e)) from e
    return conn


def _await_ready(conn: CandidateConnection, kill: Any) -> None:
    conn.sock.settimeout(READY_TIMEOUT_S)
    try:
        msg = wire.recv_message(conn.sock)
        if not (isinstance(msg, dict) and msg.get("type") == "ready"):
            raise wire.WireError("unexpected first message")
    except (OSError, EOFError, wire.WireError) as e:
        kill()
        detail = conn.stderr.tail().decode(errors="replace")[-1500:]
        raise InfraError(f"sandbox did not start ({type(e).__name__}: {e}); stderr: {detail}") from e


class Zygote:
    """A long-lived sandbox that has pre-imported heavy modules and forks one child per candidate.

    Every child starts from the same never-used state; after each candidate the zygote kills every
    other process in its PID namespace and wipes ``/sandbox``, ``/tmp`` and ``/dev/shm``, so nothing
    leaks from one candidate to the next. On a timeout or any anomaly the whole sandbox is killed
    and restarted.
    """

    def __init__(self, hw: Hardware, uid: int, preload: tuple[str, ...], output_cap: int) -> None:
        """Remember the settings; the sandbox starts on first use."""
        self.hw, self.uid, self.preload, self.output_cap = hw, uid, preload, output_cap
        self._proc: subprocess.Popen[bytes] | None = None
        self._ctrl: socket.socket | None = None
        self._log: CappedReader | None = None
        self._scratch: Path | None = None

    @property
    def alive(self) -> bool:
        """Whether the zygote sandbox is running."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the zygote sandbox.

        Raises:
            InfraError: If it does not start.
        """
        self.stop()
        parent, child = socket.socketpair()
        lim = rlimits(self.hw)
        lim.pop("RLIMIT_DATA", None)  # the zygote holds the pre-imported modules; each child gets the limit
        if self._scratch is None and detect_isolation().level not in _PRIVATE_SCRATCH:
            self._scratch = tagged_tempdir("zygote")  # owner-tagged: a dead worker's is swept
            os.chmod(self._scratch, 0o777)
        policy = zygote_policy(self._scratch or Path(SANDBOX_WORKDIR))
        cmd = sandbox_command(
            [
                *_serve_argv(),
                "zygote",
                str(child.fileno()),
                ",".join(self.preload),
                ",".join(policy.scratch),
                policy.reap,
            ],
            workdir=None,
            uid=self.uid,
            hw=self.hw,
        )
        try:
            self._proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                pass_fds=(child.fileno(),),
                env=sandbox_env(self.hw, self.uid),
                cwd=policy.cwd,
                start_new_session=True,
                preexec_fn=preexec(lim),
            )
        except OSError as e:
            raise InfraError(f"could not start the warm sandbox: {e}") from e
        finally:
            child.close()
        assert self._proc.stderr is not None
        self._ctrl = parent
        self._log = CappedReader(self._proc.stderr, 8192)
        conn = CandidateConnection(parent, self._log, self._log, self._proc)
        _await_ready(conn, self.stop)

    def stop(self) -> None:
        """Kill the zygote sandbox and everything in it."""
        if self._proc is not None:
            kill_group(self._proc)
            kill_candidate_uid(self.uid)
        if self._ctrl is not None:
            self._ctrl.close()
        self._proc = self._ctrl = None

    def killed_by_signal(self, wait: float = 0.05) -> str | None:
        """The signal that killed the sandbox's outer process, if it was killed (None otherwise).

        Only a process outside the sandbox can signal the outer process (bwrap: another PID
        namespace and uid), so this is the host's doing, never the candidate's.
        """
        proc = self._proc
        if proc is None or detect_isolation().level != "bwrap":
            return None
        try:
            rc = proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None
        if rc >= 0:
            return None
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return str(-rc)

    def discard_scratch(self) -> None:
        """Remove the scratch directory (after :meth:`stop`, when the zygote is done for good)."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def spawn(self, timeout: float = 10.0, memory: CandidateMemory | None = None) -> CandidateConnection:
        """Fork a fresh child and connect to it.

        With ``memory``, the child waits until it has been moved into the candidate's cgroup (or
        sets its ``RLIMIT_DATA`` headroom above the zygote's state) before running anything.

        Raises:
            InfraError: If the zygote does not answer (it is then stopped).
        """
        if not self.alive:
            self.start()
        assert self._ctrl is not None
        lim = rlimits(self.hw)
        lim.pop("RLIMIT_DATA", None)  # relative to the zygote's state: see data_headroom
        limits = {k: v for k, v in lim.items()}
        hold = memory is not None and memory.cgroup is not None
        headroom = memory.data_limit_bytes if memory is not None else None
        try:
            self._ctrl.settimeout(timeout)
            wire.send_message(
                self._ctrl,
                {
                    "op": "spawn",
                    "env": sandbox_env(self.hw, self.uid),
                    "limits": limits,
                    "hold": hold,
                    "data_headroom": headroom or 0,
                },
            )
            _, fds, _, _ = socket.recv_fds(self._ctrl, 1, 3)
            reply = wire.recv_message(self._ctrl)
            if len(fds) != 3 or not (isinstance(reply, dict) and reply.get("type") == "spawned"):
                raise wire.WireError("bad spawn reply")
        except (OSError, EOFError, wire.WireError) as e:
            self.stop()
            raise InfraError(f"warm sandbox failed to fork a candidate: {e}") from e
        conn = CandidateConnection(
            socket.socket(fileno=fds[0]),
            CappedReader(fds[1], self.output_cap),
            CappedReader(fds[2], self.output_cap),
        )
        conn.sock.settimeout(timeout)
        try:
            if hold:
                assert memory is not None
                attach_child(conn.sock, memory, timeout)
            first = wire.recv_message(conn.sock)
            if not (isinstance(first, dict) and first.get("type") == "ready"):
                raise wire.WireError("child did not report ready")
        except (OSError, EOFError, ValueError, CgroupError, wire.WireError) as e:
            self.stop()
            raise InfraError(f"warm sandbox child did not start: {e}") from e
        return conn

    def reap(self, timeout: float = 10.0) -> None:
        """Kill every process but the zygote, wipe scratch space and check it; retire it if unclean.

        The zygote checks its sandbox against its baseline and this side looks again where it can
        (:func:`outside_leftovers`). Anything left, or no answer, retires the zygote: it is stopped
        (the next candidate gets a fresh sandbox) and a warning is logged; this is an
        infrastructure event, never the next candidate's failure.
        """
        if not self.alive or self._ctrl is None:
            return
        try:
            self._ctrl.settimeout(timeout)
            wire.send_message(self._ctrl, {"op": "reap"})
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                reply = wire.recv_message(self._ctrl)
                if isinstance(reply, dict) and reply.get("type") == "reaped":
                    told = reply.get("problems")
                    problems = [str(p)[:300] for p in told[:10]] if isinstance(told, list) else ["bad reply"]
                    break
            else:
                raise TimeoutError("no reap reply")
        except (OSError, EOFError, wire.WireError) as e:
            problems = [f"the reap failed: {e}"]
        if not problems:
            problems = self._outside_leftovers()
        if problems:
            log.warning("retiring the warm sandbox of uid %d: %s", self.uid, "; ".join(problems)[:2000])
            self.stop()
            self.discard_scratch()  # a host directory: the next start makes a fresh one

    def _outside_leftovers(self) -> list[str]:
        """What this side sees left in the zygote's scratch space, where it can look (else nothing)."""
        level = detect_isolation().level
        root, owner = "/", (self.uid if detect_isolation().drops_uid else None)
        if level == "bwrap":  # the sandbox's own root, through its init process (bwrap's child)
            pid = self._proc.pid if self._proc is not None else None
            try:
                with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as f:
                    root = f"/proc/{f.read().split()[0]}/root"
            except (OSError, IndexError):
                return []
        policy = zygote_policy(self._scratch or Path(SANDBOX_WORKDIR))
        return outside_leftovers(policy.scratch, owner, root=root, ipc=level == "container")


def outside_leftovers(
    scratch: tuple[str, ...], owner: int | None, *, root: str = "/", ipc: bool = False, limit: int = 10000
) -> list[str]:
    """Entries of ``owner`` (None: any entry) in ``scratch``, seen from the trusted side (empty: clean).

    Looks at each directory's entries under ``root`` (``/``, or a sandbox's root as ``/proc/PID/root``)
    and one level into others' world-writable directories, without following links, at most
    ``limit`` entries in all; with ``ipc`` also at this IPC namespace's SysV objects of ``owner``.
    """
    found: list[str] = []
    todo = [(os.path.join(root, d.lstrip("/")), True) for d in scratch]
    seen = 0
    while todo and len(found) < 10:
        path, top = todo.pop()
        try:
            with os.scandir(path) as it:
                for e in it:
                    seen += 1
                    if seen > limit:
                        return [*found, f"more than {limit} entries in the scratch space"]
                    st = e.stat(follow_symlinks=False)
                    if owner is None or st.st_uid == owner:
                        found.append(e.path)
                    elif top and stat.S_ISDIR(st.st_mode) and st.st_mode & 0o002:
                        todo.append((e.path, False))
        except OSError:
            continue  # gone, or not ours to read
    for kind in ("shm", "sem", "msg") if ipc and owner is not None else ():
        try:
            with open(f"/proc/sysvipc/{kind}", encoding="ascii") as f:
                head, *rows = f.read().splitlines()
        except (OSError, ValueError):
            continue
        cols = head.split()
        for row in rows:
            rec = dict(zip(cols, row.split(), strict=False))
            if owner in (int(rec.get("uid", -1)), int(rec.get("cuid", -1))):
                found.append(f"SysV {kind} key {rec.get('key')}")
    return found
