"""A container's candidate zygote forked from the interpreter that already imported torch.

Inside an evobench container (isolation level ``container``) the trusted server and the candidate
zygote both need numpy and torch. Started as two interpreters, a cold (per-evaluation) container
imports torch twice on its CPU share. Instead ``container_boot`` imports only the standard library,
this module's harness dependencies and the variant's preload modules, forks the zygote from that
state, and only then (in the parent) loads the registry, the scorer and its data. The process that
forks holds nothing a candidate may not see: no manifest, scorer parameters, data or keys (its
command line, a hardware spec and a socket path, and the container environment set by the image
and the backend, stay readable in the child's memory; neither carries a secret).

Before serving, the forked child gives up everything the exec path (``setpriv`` in
``isolation.sandbox_command``) gives up: it starts a new session, closes every inherited file
descriptor, takes the zygote's rlimits and the candidate environment, switches to the candidate
uid/gid with no supplementary groups, sets ``no_new_privs`` and clears its capability sets; it then
checks the result in ``/proc/self/status`` and refuses to serve if anything is left. A zygote that
dies or misbehaves is restarted through the ordinary exec path, never forked again (the server
holds secrets by then).
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import resource
import signal
import socket
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

from harness.envs.manifest import Hardware

from .isolation import SANDBOX_WORKDIR, detect_isolation, preexec, rlimits, sandbox_env, zygote_policy
from .process import CandidateConnection, CappedReader, Zygote, _await_ready, kill_candidate_uid

log = logging.getLogger(__name__)
_PR_SET_NO_NEW_PRIVS = 38
_CAP_VERSION_3 = 0x20080522
_MEMORY_LIMITS = ("RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_RSS")
_CHILD_FAILED = 70


@dataclass(frozen=True)
class ZygoteSpec:
    """What the host tells a container about the zygote to fork (nothing secret: the candidate's limits)."""

    hardware: Hardware
    """The variant's hardware spec (limits, environment, output cap)."""
    preload: tuple[str, ...]
    """Modules imported before the fork (the variant's ``preload``)."""
    collapse: bool = True
    """Move the zygote to huge pages (worth it only when it serves more than one candidate)."""

    def to_json(self) -> str:
        """Serialise for the container's command line."""
        hw = self.hardware.model_dump(mode="json")
        return json.dumps({"hardware": hw, "preload": list(self.preload), "collapse": self.collapse})

    @classmethod
    def from_json(cls, text: str) -> ZygoteSpec:
        """Parse :meth:`to_json` output.

        Raises:
            ValueError: If the text is not a valid spec.
        """
        try:
            raw = json.loads(text)
            return cls(Hardware.model_validate(raw["hardware"]), tuple(raw["preload"]), bool(raw["collapse"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"bad zygote spec: {e}") from e


@dataclass
class ForkedChild:
    """The parent's end of a freshly forked zygote."""

    pid: int
    ctrl: socket.socket
    stderr_fd: int
    spec: ZygoteSpec
    uid: int


def zygote_limits(hw: Hardware) -> dict[str, int]:
    """The zygote's own rlimits: the candidate's, minus memory limits (each child gets those at spawn)."""
    return {k: v for k, v in rlimits(hw).items() if k not in _MEMORY_LIMITS}


def fork_zygote(spec: ZygoteSpec, uid: int) -> ForkedChild | None:
    """Import the preload modules, then fork the zygote (call before anything secret is loaded).

    The candidate's thread-count variables (``candidate_env``) must be in the environment before
    numpy is first imported (``container_boot`` does that): OpenBLAS starts its threads on import.

    Returns None (and forks nothing) where the isolation level is not ``container`` or the process
    is not single-threaded; the caller then starts the zygote the ordinary way.
    """
    if detect_isolation().level != "container":
        return None
    for name in spec.preload:
        __import__(name)
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:  # a lock held by another thread would be forked held
        log.warning("not forking the zygote: %d threads (set the *_NUM_THREADS variables first)", threads)
        return None
    parent, child = socket.socketpair()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            parent.close()
            os.close(err_r)
            _become_candidate(spec, uid, child, err_w)
            from harness.inside.zygote import zygote  # the inside package, as the exec path runs it

            policy = zygote_policy(Path(SANDBOX_WORKDIR))
            zygote(child, [], list(policy.scratch), policy.reap, collapse=spec.collapse)
        except BaseException:  # noqa: BLE001 - report why the zygote could not start, then exit
            traceback.print_exc()
            sys.stderr.flush()
        finally:
            os._exit(_CHILD_FAILED)
    child.close()
    os.close(err_w)
    return ForkedChild(pid, parent, err_r, spec, uid)


def _become_candidate(spec: ZygoteSpec, uid: int, ctrl: socket.socket, err_w: int) -> None:
    """In the forked child: shed every privilege and resource the trusted process had.

    Raises:
        PermissionError: If some privilege is still held afterwards.
    """
    os.setsid()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.dup2(err_w, 2)
    keep = {0, 1, 2, ctrl.fileno()}
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass  # the directory's own descriptor, already gone
    lim = zygote_limits(spec.hardware)
    preexec(lim)()
    if "RLIMIT_NPROC" in lim:  # counted per real uid, so meaningful from the switch below on
        resource.setrlimit(resource.RLIMIT_NPROC, (lim["RLIMIT_NPROC"], lim["RLIMIT_NPROC"]))
    policy = zygote_policy(Path(SANDBOX_WORKDIR))
    if policy.cwd is not None:
        os.chdir(policy.cwd)
    os.environ.clear()
    os.environ.update(sandbox_env(spec.hardware, uid))
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise PermissionError(f"prctl(PR_SET_NO_NEW_PRIVS) failed: errno {ctypes.get_errno()}")
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable x 2 words: all empty
    if libc.capset(header, data) != 0:
        raise PermissionError(f"capset failed: errno {ctypes.get_errno()}")
    _check_unprivileged(uid)


def _check_unprivileged(uid: int) -> None:
    """Raise unless ids, groups, capabilities and no_new_privs are exactly a candidate's.

    Raises:
        PermissionError: If a privilege is left.
    """
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (uid, uid, uid) or os.getgroups():
        raise PermissionError("uid / gid / groups were not fully switched")
    with open("/proc/self/status", encoding="ascii") as f:
        status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    for key in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
        if int(status.get(key, "0").strip() or "0", 16):
            raise PermissionError(f"{key} is not empty after the switch")
    if status.get("NoNewPrivs", "0").strip() != "1":
        raise PermissionError("no_new_privs is not set")


class PreforkedZygote(Zygote):
    """A :class:`Zygote` whose first process was forked by ``container_boot`` (see module docstring).

    Once that process is gone (stopped after an anomaly, or dead), :meth:`start` starts a fresh
    zygote the ordinary way.
    """

    def __init__(self, child: ForkedChild) -> None:
        """Adopt a forked zygote (call :meth:`wait_ready` before use)."""
        hw = child.spec.hardware
        super().__init__(hw, child.uid, child.spec.preload, hw.output_kb * 1024)
        self._pid: int | None = child.pid
        self._ctrl = child.ctrl
        self._log = CappedReader(child.stderr_fd, 8192)

    def matches(self, hw: Hardware, preload: tuple[str, ...], uid: int) -> bool:
        """Whether this zygote was forked for exactly these settings."""
        return (self.hw, self.preload, self.uid) == (hw, preload, uid)

    def wait_ready(self) -> None:
        """Wait for the forked zygote's ``ready`` message.

        Raises:
            InfraError: If it does not report ready (it is then stopped; the next use restarts it).
        """
        assert self._ctrl is not None and self._log is not None
        _await_ready(CandidateConnection(self._ctrl, self._log, self._log), self.stop)

    @property
    def alive(self) -> bool:
        """Whether the zygote (forked, or restarted the ordinary way) is running."""
        if self._pid is None:
            return super().alive
        try:
            done, _ = os.waitpid(self._pid, os.WNOHANG)
        except ChildProcessError:
            done = self._pid
        if done:
            self._pid = None
            return False
        return True

    def stop(self) -> None:
        """Kill the zygote and everything under its uid."""
        if self._pid is not None:
            try:
                os.killpg(self._pid, signal.SIGKILL)
            except OSError:
                pass
            kill_candidate_uid(self.uid)
            try:
                os.waitpid(self._pid, 0)
            except ChildProcessError:
                pass
            self._pid = None
        super().stop()
