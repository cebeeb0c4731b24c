"""``CandidateRuntime`` implementation used by the trusted scorer inside a worker process."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.envs.manifest import Hardware, Language
from harness.evaluation.errors import CandidateError, CandidateTimeout, InfraError
from harness.inside import wire
from harness.scoring.api import CallResult, ExecResult

from .freshdir import FreshDir
from .isolation import preexec, rlimits, sandbox_command, sandbox_env
from .lifetime import tagged_tempdir
from .limits import CandidateMemory, CgroupError
from .limits.cpu import CaseClock
from .limits.disk import WorkdirQuota, hit_quota, quota_reason
from .process import CandidateConnection, CappedReader, Zygote, kill_candidate_uid, kill_group, launch_cold

LAUNCHER_PIDS = 4
"""Processes of the sandbox launcher (bwrap and its init) counted in a candidate's pids limit."""

_REASON_CAP = 2000


class SandboxedCandidate:
    """One candidate program under evaluation, seen from the trusted side.

    Python candidates are loaded lazily on the first :meth:`call` into a sandboxed process (a fresh
    one in cold mode, a fresh fork of the worker's zygote in warm mode). :meth:`run` starts a fresh
    sandboxed process per command with :attr:`workdir` bound at ``/sandbox``.
    """

    def __init__(
        self,
        source: str,
        *,
        language: Language,
        filename: str,
        hw: Hardware,
        deadline: float,
        uid: int,
        zygote: Zygote | None,
        preload: tuple[str, ...] = (),
        driver: str = "",
    ) -> None:
        """Prepare (but do not start) the sandbox for one candidate.

        ``driver`` is the source of the family's sandbox driver (empty: none), loaded next to a
        Python candidate and reached with :meth:`call_driver`.
        """
        self._source = source
        self.language = language
        self.filename = filename
        self.hw = hw
        self.deadline = deadline
        self.uid = uid
        self.zygote = zygote
        self.preload = preload
        self.driver = driver
        self._workdir = tagged_tempdir("cand")  # owner-tagged: a killed worker's is swept
        os.chmod(self._workdir, 0o777)  # the unprivileged sandbox uid writes build outputs here
        self._quota = WorkdirQuota(self._workdir, hw.disk_mb)  # a sized tmpfs where we may mount
        self._conn: CandidateConnection | None = None
        self._out_cap = hw.output_kb * 1024
        self.setup_seconds = 0.0
        self.candidate_seconds = 0.0
        self.stdout_tail = b""
        self.stderr_tail = b""
        self._killed_sandbox = False
        self._loaded = False
        self._memory: CandidateMemory | None = None
        self._time_lock = threading.Lock()

    # -- CandidateRuntime -------------------------------------------------------------------
    @property
    def source(self) -> str:
        """The candidate's program text."""
        return self._source

    @property
    def workdir(self) -> Path:
        """Host directory seen as ``/sandbox`` by :meth:`run` processes."""
        return self._workdir

    def remaining(self) -> float:
        """Seconds left before the evaluation's deadline."""
        return self.deadline - time.monotonic()

    def call(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        """Call a candidate function in the sandbox (see ``CandidateRuntime.call``).

        Raises:
            CandidateError: The candidate raised, crashed or sent a malformed reply.
            CandidateTimeout: The call overran; the sandbox was killed.
            InfraError: The sandbox could not be started.
        """
        return self._call(function, args, timeout, via_driver=False)

    def call_driver(self, function: str, *args: Any, timeout: float | None = None) -> CallResult:
        """Call a function of the family's sandbox driver (see ``CandidateRuntime.call_driver``).

        Raises:
            CandidateError: The call raised (in the driver or the candidate code it called),
                crashed or sent a malformed reply.
            CandidateTimeout: The call overran; the sandbox was killed.
            InfraError: The family has no sandbox driver, or the sandbox could not be started.
        """
        if not self.driver:
            raise InfraError(f"call_driver({function!r}): this family declares no sandbox_driver")
        return self._call(function, args, timeout, via_driver=True)

    def _call(
        self, function: str, args: tuple[Any, ...], timeout: float | None, via_driver: bool
    ) -> CallResult:
        conn = self._connect()
        limit = min(timeout if timeout is not None else self.remaining(), self.remaining())
        if limit <= 0:
            raise CandidateTimeout("evaluation time budget exhausted before the call")
        t0 = time.perf_counter()
        try:
            reply = conn.request(
                {"op": "call", "fn": function, "args": list(args), "driver": via_driver}, limit
            )
        except TimeoutError:
            self._kill()
            raise CandidateTimeout(
                f"{function}() did not return within {limit:.1f} s; process tree killed"
            ) from None
        except EOFError:
            why = self._death(f"{function}()", conn.exit_info())  # before _kill removes the cgroup
            self._kill()
            raise CandidateError(why) from None
        except wire.WireError as e:
            self._kill()
            raise CandidateError(f"{function}() returned a malformed reply: {e}") from None
        except OSError as e:
            self._kill()
            raise CandidateError(f"{function}(): connection to the candidate failed: {e}") from None
        seconds = time.perf_counter() - t0
        self.candidate_seconds += seconds
        return CallResult(self._unwrap(reply, function), seconds)

    def transport_seconds(self, *args: Any, repeats: int = 5) -> float:
        """Minimum round trip of echoing ``args`` through the sandbox, before the program is loaded.

        No candidate code has run in the process yet, so the figure cannot be influenced by it;
        scorers subtract it from call times so that timing terms measure the candidate, not IPC.

        Raises:
            RuntimeError: If the program has already been loaded.
            InfraError: If the sandbox cannot be started or does not answer.
        """
        if self._loaded:
            raise RuntimeError("transport_seconds() must be called before the first call()")
        conn = self._start()
        best = float("inf")
        for _ in range(max(1, repeats)):
            t0 = time.perf_counter()
            try:
                conn.request({"op": "echo", "args": list(args)}, min(10.0, max(self.remaining(), 0.1)))
            except (TimeoutError, EOFError, OSError, wire.WireError) as e:
                self._kill()
                raise InfraError(f"transport calibration failed: {e}") from e
            best = min(best, time.perf_counter() - t0)
        return best

    def run(
        self,
        argv: list[str],
        stdin: bytes = b"",
        *,
        timeout: float,
        cpu_seconds: float | None = None,
        memory_mb: int | None = None,
        cpus: tuple[int, ...] | None = None,
        active_seconds: float | None = None,
        fresh_cwd: tuple[str, ...] | None = None,
    ) -> ExecResult:
        """Run a command in a fresh sandboxed process (see ``CandidateRuntime.run``).

        Raises:
            InfraError: The sandbox could not be started.
            ValueError: If a ``fresh_cwd`` name is not a plain file name of the work directory.
        """
        timeout = min(timeout, max(self.remaining(), 0.0))
        lim = rlimits(self.hw, cpu_seconds=cpu_seconds, memory_mb=memory_mb)
        watch = _Watch(cpu_seconds, active_seconds, cpus)
        scratch = FreshDir(self._workdir, fresh_cwd, self.hw.disk_mb) if fresh_cwd is not None else None
        try:
            cmd = sandbox_command(
                argv,
                workdir=scratch.workdir if scratch else self._workdir,
                uid=self.uid,
                hw=self.hw,
                nproc=lim.get("RLIMIT_NPROC"),
                fresh=scratch.fresh if scratch else None,
            )
            try:
                memory = CandidateMemory(memory_mb or self.hw.memory_mb, self.hw.pids + LAUNCHER_PIDS)
            except CgroupError as e:
                raise InfraError(str(e)) from e
            try:
                res = self._run(cmd, lim, memory, stdin, timeout, cpu_seconds, watch, scratch)
            finally:
                watch.close()
                memory.close()
        finally:
            if scratch is not None:
                scratch.close()
        return res

    def _run(
        self,
        cmd: list[str],
        lim: dict[str, int],
        memory: CandidateMemory,
        stdin: bytes,
        timeout: float,
        cpu_seconds: float | None,
        watch: _Watch,
        scratch: FreshDir | None = None,
    ) -> ExecResult:
        apply = preexec(lim)
        watch.start(memory)

        def _preexec() -> None:
            memory.join()
            watch.join()
            apply()

        t0 = time.perf_counter()
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=sandbox_env(self.hw, self.uid),
                cwd=scratch.workdir if scratch else self._workdir,
                start_new_session=True,
                preexec_fn=_preexec,
            )
        except (OSError, subprocess.SubprocessError) as e:
            raise InfraError(f"could not start the sandbox: {e}") from e
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        out, err = CappedReader(proc.stdout, self._out_cap), CappedReader(proc.stderr, self._out_cap)
        threading.Thread(target=_feed, args=(proc.stdin, stdin), daemon=True).start()
        timed_out, limit = False, ""
        try:
            _, status, usage = _wait4(proc, timeout, watch.over)
        except TimeoutError as e:
            kill_group(proc)
            timed_out, limit, status, usage = True, str(e) or "wall", -9, None
        kill_candidate_uid(self.uid)
        seconds = time.perf_counter() - t0
        with self._time_lock:
            self.candidate_seconds += seconds
        rc: int | None = os.waitstatus_to_exitcode(status) if not timed_out else None
        # bwrap reports a signal death of the sandboxed command as exit code 128 + signal.
        sig = -rc if (rc is not None and rc < 0) else (rc - 128 if rc is not None and 128 < rc < 160 else 0)
        if sig == signal.SIGXCPU and cpu_seconds is not None:
            timed_out, limit, rc = True, "cpu", None
        elif not timed_out and memory.oom_killed():
            limit = "memory"
        if not limit and (self._quota.full() or (scratch is not None and scratch.full())):
            limit = "disk"  # the work directory's tmpfs is full: a write of the command failed
        elif not limit and hit_quota(err.tail(), rc):
            limit = "disk"  # a sandbox tmpfs (/tmp, /dev/shm, a fresh /sandbox) is gone with it
        if out.truncated or err.truncated:
            limit = limit or "output"
        # Only meaningful without bwrap: there wait4 sees the command's own CPU time; under bwrap it
        # is the launcher's (the kernel still enforces RLIMIT_CPU on the command itself).
        cpu = (usage.ru_utime + usage.ru_stime) if usage is not None else float("nan")
        measured, wait = False, float("nan")
        if watch.clock is not None and watch.clock.available:  # the tree's own, precise figures
            cpu, wait, measured = watch.clock.cpu_seconds(), watch.clock.wait_seconds, True
            if cpu_seconds is not None and cpu > cpu_seconds and not timed_out:
                timed_out, limit, rc = True, "cpu", None  # ended between two polls, past the limit
        return ExecResult(rc, out.tail(), err.tail(), seconds, cpu, timed_out, limit, wait, measured)

    # -- lifecycle ----------------------------------------------------------------------------
    def _start(self) -> CandidateConnection:
        """Start (or fork) the sandboxed process without loading the program."""
        if self._conn is not None:
            return self._conn
        t0 = time.perf_counter()
        try:
            if self._memory is None:
                self._memory = CandidateMemory(
                    self.hw.memory_mb, self.hw.pids + LAUNCHER_PIDS, startup=self.zygote is None
                )
            if self.zygote is not None:
                self._conn = self.zygote.spawn(memory=self._memory)
            else:
                self._conn = launch_cold(
                    self.hw, self.uid, self._workdir, self._out_cap, self.preload, self._memory
                )
        except CgroupError as e:
            raise InfraError(str(e)) from e
        finally:
            self.setup_seconds += time.perf_counter() - t0
        return self._conn

    def _connect(self) -> CandidateConnection:
        conn = self._start()
        if self._loaded:
            return conn
        t0 = time.perf_counter()
        limit = self.remaining()
        try:
            load = {"op": "load", "source": self._source, "filename": self.filename, "driver": self.driver}
            reply = conn.request(load, limit)
        except TimeoutError:
            self._kill()
            raise CandidateTimeout(f"loading the program did not finish within {limit:.1f} s") from None
        except (EOFError, OSError, wire.WireError) as e:
            info = conn.exit_info() if isinstance(e, EOFError) else str(e)
            why = self._death("loading the program", info, verb="failed")
            self._kill()
            raise CandidateError(why) from None
        finally:
            self.setup_seconds += time.perf_counter() - t0
        self._loaded = True
        self._unwrap(reply, "import")
        return conn

    def _unwrap(self, reply: Any, what: str) -> Any:
        if not isinstance(reply, dict) or reply.get("type") not in ("result", "loaded", "error"):
            self._kill()
            raise CandidateError(f"{what}: unexpected reply from the candidate process")
        if reply["type"] == "error":
            msg = f"{what} raised {reply.get('exc')}: {reply.get('message')}"
            out_of_memory = reply.get("exc") == "MemoryError" or "[Errno 12]" in str(reply.get("message"))
            if out_of_memory and self._memory is not None:
                msg += f" (over the {self._memory.label()})"
            elif "[Errno 28]" in str(reply.get("message")):  # ENOSPC: a tmpfs of the quota is full
                msg += f" ({quota_reason(self.hw.disk_mb)})"
            tb = str(reply.get("traceback", ""))
            raise CandidateError((msg + "\n" + tb)[-_REASON_CAP:] if tb else msg[:_REASON_CAP])
        return reply.get("value")

    def _death(self, what: str, info: str, verb: str = "") -> str:
        """Why the candidate's process died: a kill by its memory limit is named as such.

        Raises:
            InfraError: If the host killed it (see :meth:`_host_side_death`); the sandbox is killed.
        """
        host = self._host_side_death()
        if host:
            self._kill()
            raise InfraError(f"{what}: {host}; not the candidate's doing")
        mem = self._memory
        if mem is not None and mem.oom_killed():
            return f"{what}: exceeded the {mem.label()}; the kernel killed the process tree"
        hint = ""
        if mem is not None and mem.cgroup is None and ("SIGKILL" in info or "SIGSEGV" in info):
            hint = f" (possibly the {mem.label()})"
        return f"{what} {verb}: {info}{hint}" if verb else f"{what}: {info}{hint}"

    def _host_side_death(self) -> str:
        """Why the host, not the candidate, ended the process ('' when it may have been the candidate).

        Told apart only where the candidate cannot have caused it: the machine-wide OOM killer
        (cgroup v2 events), or a signal to the warm sandbox's outer process, which runs outside the
        candidate's PID namespace and under another uid.
        """
        if self._memory is not None and self._memory.host_oom_killed():
            return "the machine ran out of memory and the kernel's OOM killer ended the sandbox"
        sig = self.zygote.killed_by_signal() if self.zygote is not None else None
        if sig:
            return f"the warm sandbox was killed from outside by signal {sig} while the candidate ran"
        return ""

    def _kill(self) -> None:
        """Kill the candidate's whole sandbox (a warm zygote is restarted on next use)."""
        if self._conn is not None:
            self._collect_output()
            if self._conn.proc is not None:
                kill_group(self._conn.proc)
                kill_candidate_uid(self.uid)
            self._conn.sock.close()
        if self.zygote is not None and self._conn is not None:
            self.zygote.stop()
        if self._memory is not None:
            self._memory.close()
        self._killed_sandbox = True

    def _collect_output(self) -> None:
        if self._conn is not None:
            self.stdout_tail = self._conn.stdout.tail(0.2)
            self.stderr_tail = self._conn.stderr.tail(0.2)

    def end_calls(self, timeout: float = 10.0) -> None:
        """End the call process and everything it started; return once they have all exited.

        A later phase that must not meet the earlier one (LLM-SR's fresh prediction process) starts
        after this. A later :meth:`call` starts and loads a fresh process.

        Raises:
            InfraError: If some process of the candidate is still alive after ``timeout`` seconds.
        """
        conn = self._conn
        if conn is not None and not self._killed_sandbox:
            if conn.proc is not None:
                kill_group(conn.proc)
                kill_candidate_uid(self.uid)
            conn.sock.close()
            if self.zygote is not None:
                self.zygote.reap()  # returns once nothing but the zygote is left in its sandbox
            self._collect_output()
        self._conn = None
        self._loaded = False
        self._killed_sandbox = False
        memory, self._memory = self._memory, None
        if memory is None:
            return
        memory.close()  # also kills anything that escaped the zygote's reap
        if memory.cgroup is not None and not memory.cgroup.wait_empty(timeout):
            raise InfraError(f"the candidate's processes did not exit within {timeout:.0f} s of SIGKILL")

    def close(self) -> None:
        """End the candidate: kill its processes, reap a warm zygote, delete the work directory."""
        self.end_calls()
        self._quota.close()
        shutil.rmtree(self._workdir, ignore_errors=True)


def _feed(pipe: Any, data: bytes) -> None:
    try:
        pipe.write(data)
    except OSError:
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _wait4(
    proc: subprocess.Popen[bytes], timeout: float, over: Callable[[], str] = lambda: ""
) -> tuple[int, int, Any]:
    """Wait for ``proc`` and return (pid, status, rusage) of it and its children.

    Raises:
        TimeoutError: ``timeout`` passed (message empty) or ``over()`` named a limit (the message).
    """
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return pid, status, usage
        if time.monotonic() >= deadline:
            raise TimeoutError
        if which := over():
            raise TimeoutError(which)
        time.sleep(delay)
        delay = min(delay * 2, 0.01)


class _Watch:
    """Precise CPU / active-time limits and CPU pinning of one :meth:`SandboxedCandidate.run`."""

    def __init__(self, cpu_seconds: float | None, active_seconds: float | None, cpus: tuple[int, ...] | None):
        self.cpu_seconds, self.active_seconds, self.cpus = cpu_seconds, active_seconds, cpus
        self.clock: CaseClock | None = None

    def start(self, memory: CandidateMemory) -> None:
        """Make the clock (just before the process starts, so its elapsed time is the run's)."""
        if self.cpu_seconds is not None or self.active_seconds is not None:
            cg = memory.cgroup
            self.clock = CaseClock(cg.memory_dir if cg else None, cg.hier.version if cg else None)

    def join(self) -> None:
        """``preexec_fn`` part: join the clock's group and the pinned CPUs."""
        if self.clock is not None:
            self.clock.join()
        if self.cpus:
            os.sched_setaffinity(0, self.cpus)

    def over(self) -> str:
        """``cpu`` / ``wall`` when a limit is exceeded now, else ``""``."""
        if self.clock is None:
            return ""
        self.clock.sample()
        if self.cpu_seconds is not None and self.clock.cpu_seconds() > self.cpu_seconds:  # NaN: False
            return "cpu"
        if self.active_seconds is not None and self.clock.active_seconds > self.active_seconds:
            return "wall"
        return ""

    def close(self) -> None:
        """Remove the clock's group."""
        if self.clock is not None:
            self.clock.close()
