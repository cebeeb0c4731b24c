"""Start many ``bench`` commands from one process that imported their libraries once.

A learning run spends about 10 s of CPU importing torch, transformers and peft before it does
anything; a script that starts dozens of runs (the learning proof) pays that once with
:class:`PreloadedBench`. It starts a server process that imports the CLI and the modules it is
given, then forks one child per command. Each command still runs in a process of its own (own pid,
exit code, stdout and stderr, stdin from ``/dev/null``, its ``atexit`` handlers run at its end),
exactly as ``bench`` would run it; only the imports are shared.

Forking a process is safe only while it has one thread: the server checks that before every fork
and refuses otherwise. Protocol (one JSON object per line): request ``{"argv", "env", "cwd",
"stdout", "stderr"}`` on the server's stdin; replies ``{"pid"}`` when the child started and ``{"code"}``
(the exit code, or minus the signal that killed it) when it ended.
"""

from __future__ import annotations

import atexit
import importlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from tempfile import TemporaryDirectory
from types import TracebackType
from typing import Any

PRELOAD_TORCH = ("torch", "transformers", "peft", "transformers.models.llama.modeling_llama")
"""What a learning run imports first (the costly part of its start)."""


class PreloadError(RuntimeError):
    """The preloading server died, or answered out of protocol."""


def _child(request: Mapping[str, Any]) -> None:
    """In the forked child: become the command's process, run it, and exit with its code."""
    code: object = 1
    try:
        os.setpgid(0, 0)  # its own process group, as a fresh `bench` under a shell would have
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
            out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, fd)
            os.close(out)
        env = {str(k): str(v) for k, v in dict(request.get("env") or {}).items()}
        os.environ.update(env)
        if request.get("cwd"):
            os.chdir(str(request["cwd"]))
        if env.get("PYTHONWARNINGS") in {"ignore", "default", "error", "always", "module", "once"}:
            import warnings  # read at interpreter start only: apply it as a fresh process would

            warnings.simplefilter(env["PYTHONWARNINGS"])  # type: ignore[arg-type]
        argv = [str(a) for a in request["argv"]]
        sys.argv = ["bench", *argv]
        from evobench.cli.main import main

        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    except BaseException:  # noqa: BLE001 - whatever happened is this command's failure
        import traceback

        traceback.print_exc()
        code = 1
    finally:
        try:
            atexit._run_exitfuncs()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code if isinstance(code, int) else (0 if code is None else 1))


def serve(modules: Sequence[str]) -> int:
    """Import ``modules`` and the CLI, then run one forked child per request line on stdin."""
    for name in modules:
        importlib.import_module(name)
    importlib.import_module("evobench.cli.main")
    reply = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if threading.active_count() != 1:
            raise PreloadError(f"cannot fork safely: {threading.active_count()} threads are running")
        pid = os.fork()
        if pid == 0:
            _child(request)
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        reply.write(json.dumps({"code": code}) + "\n")
        reply.flush()
    return 0


class PreloadedBench:
    """A server that has imported ``modules`` once and runs ``bench`` commands as forked children.

    Use as a context manager; :meth:`run` is shaped like ``subprocess.run(capture_output=True,
    text=True)``.
    """

    def __init__(self, modules: Sequence[str] = PRELOAD_TORCH) -> None:
        """Remember what to preload (the server starts on ``__enter__``)."""
        self.modules = tuple(modules)
        self._proc: subprocess.Popen[str] | None = None
        self._tmp: TemporaryDirectory[str] | None = None
        self._runs = 0

    def __enter__(self) -> PreloadedBench:
        """Start the server (its imports happen while the caller goes on)."""
        self._tmp = TemporaryDirectory(prefix="evobench-preload-")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "evobench.cli.preloaded", *self.modules],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        """Stop the server (closing its stdin ends it) and remove the output files."""
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._tmp is not None:
            self._tmp.cleanup()

    def _reply(self, deadline: float | None) -> dict[str, Any]:
        """The server's next reply line, read byte by byte from the pipe's descriptor.

        Never through the buffered reader: it could hold the next line already, where ``select``
        would not see it.
        """
        assert self._proc is not None and self._proc.stdout is not None
        fd = self._proc.stdout.fileno()
        line = b""
        while not line.endswith(b"\n"):
            if deadline is not None:
                ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise TimeoutError
            byte = os.read(fd, 1)
            if not byte:
                raise PreloadError(f"the preloading server ended (exit {self._proc.poll()})")
            line += byte
        reply: dict[str, Any] = json.loads(line)
        return reply

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        timeout: float | None = None,
        cwd: Path | str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``bench ARGV`` in a forked child (in ``cwd`` if given); its output is returned when it ends.

        Raises:
            PreloadError: If the server is not running or breaks the protocol.
            subprocess.TimeoutExpired: If the command ran past ``timeout`` (it is killed first).
        """
        if self._proc is None or self._proc.stdin is None or self._proc.stdout is None or self._tmp is None:
            raise PreloadError("PreloadedBench is used outside its with block")
        self._runs += 1
        files = {k: str(Path(self._tmp.name) / f"{self._runs}.{k}") for k in ("stdout", "stderr")}
        request = {"argv": list(argv), "env": dict(env or {}), "cwd": str(cwd) if cwd else "", **files}
        self._proc.stdin.write(json.dumps(request) + "\n")
        self._proc.stdin.flush()
        pid = int(self._reply(None)["pid"])
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            code = int(self._reply(deadline)["code"])
        except TimeoutError:
            os.killpg(pid, signal.SIGKILL)
            self._reply(None)
            raise subprocess.TimeoutExpired(["bench", *argv], timeout or 0.0) from None
        out, err = (Path(files[k]).read_text(errors="replace") for k in ("stdout", "stderr"))
        return subprocess.CompletedProcess(["bench", *argv], code, out, err)


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1:]))
