"""A stand-in for the ``modal`` package that binds every call to the installed package's signatures.

Each entry point (``App.lookup``, ``Image.from_dockerfile``, ``Secret.from_dict``,
``Sandbox.create`` / ``list`` / ``exec`` / ``poll`` / ``terminate``, ``ContainerProcess`` and its
streams) first binds its arguments with ``inspect.signature`` of the real modal 1.x object, so a
wrong or misspelt keyword, a missing argument or a method modal does not have fails here as it
would against Modal. Both Modal clients go through it: the evaluation backend's
``SdkModalClient`` (create / list) and the run placement's ``SdkRunHost``.

A sandbox's entrypoint is not run (the placement's is ``sleep``); its ``exec`` commands run as
local processes (``python`` is this interpreter) in the sandbox's ``workdir``, which stands for
the container's file system: it must not exist when the sandbox is created and is deleted when
the sandbox ends, so a new sandbox starts empty as on Modal. ``terminate`` kills every process
the sandbox runs, as a lost container does; ``on_exec`` lets a test lose it at a chosen moment.
"""

from __future__ import annotations

import inspect
import io
import os
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import modal as real
from modal._utils.function_utils import parse_gpu_config
from modal.container_process import ContainerProcess as RealProcess
from modal.exception import SandboxTerminatedError
from modal.io_streams import StreamReader as RealReader
from modal.io_streams import StreamWriter as RealWriter
from modal.stream_type import StreamType

stream_type = real.stream_type
_SELF = object()


def _bind(fn: Any, *args: Any, **kwargs: Any) -> inspect.BoundArguments:
    """Bind like the real callable does (TypeError on a wrong keyword), with defaults applied."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound


class _Reader:
    def __init__(self, pipe: io.BufferedReader | None, text: bool) -> None:
        self._pipe, self._text = pipe, text

    def __iter__(self) -> Iterator[str | bytes]:
        # Arbitrary chunks, as Modal's stream delivers them.
        while self._pipe is not None and (chunk := self._pipe.read1(777)):
            yield chunk.decode("utf-8", errors="replace") if self._text else chunk

    def read(self, *args: Any, **kwargs: Any) -> str | bytes:
        _bind(RealReader.read, _SELF, *args, **kwargs)  # type: ignore[misc]
        data = self._pipe.read() if self._pipe is not None else b""
        return data.decode("utf-8", errors="replace") if self._text else data


class _Writer:
    def __init__(self, pipe: io.BufferedWriter) -> None:
        self._pipe, self._buf = pipe, bytearray()

    def write(self, *args: Any, **kwargs: Any) -> None:
        data = _bind(RealWriter.write, _SELF, *args, **kwargs).arguments["data"]
        self._buf += data.encode() if isinstance(data, str) else bytes(data)

    def write_eof(self, *args: Any, **kwargs: Any) -> None:
        _bind(RealWriter.write_eof, _SELF, *args, **kwargs)
        self.drain()
        self._pipe.close()

    def drain(self, *args: Any, **kwargs: Any) -> None:
        _bind(RealWriter.drain, _SELF, *args, **kwargs)
        if self._buf and not self._pipe.closed:
            self._pipe.write(bytes(self._buf))
            self._pipe.flush()
        self._buf.clear()


class FakeProcess:
    """A local process behind ``modal.ContainerProcess``."""

    def __init__(self, popen: subprocess.Popen[bytes], text: bool) -> None:
        self._popen = popen
        self.stdout = _Reader(popen.stdout, text)  # type: ignore[arg-type]
        self.stdin = _Writer(popen.stdin)  # type: ignore[arg-type]

    def poll(self, *args: Any, **kwargs: Any) -> int | None:
        _bind(RealProcess.poll, _SELF, *args, **kwargs)
        return self._popen.poll()

    def wait(self, *args: Any, **kwargs: Any) -> int:
        _bind(RealProcess.wait, _SELF, *args, **kwargs)
        return self._popen.wait()

    @property
    def returncode(self) -> int:
        return self._popen.wait()


class FakeSandbox:
    """A passive ``modal.Sandbox``: its file system is ``workdir``, its commands local processes."""

    def __init__(self, bound: inspect.BoundArguments, owner: FakeModal) -> None:
        kw = bound.arguments
        self.object_id = "sb-" + uuid.uuid4().hex[:12]
        self.command: tuple[str, ...] = kw["args"]
        self.kwargs = {k: v for k, v in kw.items() if k != "args"}
        self.tags = dict(kw["tags"] or {})
        self.env: dict[str, str] = {}
        for secret in kw["secrets"] or ():
            self.env.update(secret.env)
        self.workdir = Path(kw["workdir"]) if kw["workdir"] else None
        if self.workdir is not None:
            assert not self.workdir.exists(), "a new sandbox starts with an empty file system"
            self.workdir.mkdir(parents=True)
        self.procs: list[subprocess.Popen[bytes]] = []
        self.exit: int | None = None
        self._owner = owner

    def exec(self, *args: Any, **kwargs: Any) -> FakeProcess:
        b = _bind(real.Sandbox.exec, _SELF, *args, **kwargs).arguments
        assert all(isinstance(a, str) for a in b["args"]), "exec arguments must be strings"
        if self._owner.on_exec is not None:
            self._owner.on_exec(self, b["args"])
        if self.exit is not None:
            raise SandboxTerminatedError(f"sandbox {self.object_id} was terminated")
        argv = [sys.executable if a == "python" else a for a in b["args"]]
        popen = subprocess.Popen(
            argv,
            cwd=b["workdir"] or self.workdir,
            env={**os.environ, **self.env, **(b["env"] or {})},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if b["stderr"] is StreamType.DEVNULL else None,
            start_new_session=True,
        )
        self.procs.append(popen)
        return FakeProcess(popen, b["text"])

    def poll(self, *args: Any, **kwargs: Any) -> int | None:
        _bind(real.Sandbox.poll, _SELF, *args, **kwargs)
        return self.exit

    def terminate(self, *args: Any, **kwargs: Any) -> None:
        _bind(real.Sandbox.terminate, _SELF, *args, **kwargs)
        if self.exit is not None:
            return
        self.exit = 137  # Modal's code for a terminated sandbox (sandbox/_common.py)
        for p in self.procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)  # the container's disk goes with it


class _Secret:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env


class FakeModal:
    """The ``modal`` module as far as evobench uses it; records what it was asked."""

    stream_type = stream_type

    def __init__(self) -> None:
        self.sandboxes: list[FakeSandbox] = []
        self.images: list[dict[str, Any]] = []
        self.on_exec: Callable[[FakeSandbox, tuple[str, ...]], None] | None = None
        self._lock = threading.Lock()
        fake = self

        class App:
            @staticmethod
            def lookup(*args: Any, **kwargs: Any) -> Any:
                b = _bind(real.App.lookup, *args, **kwargs).arguments
                return type("FakeApp", (), {"app_id": "ap-" + b["name"]})()

        class Image:
            @staticmethod
            def from_dockerfile(*args: Any, **kwargs: Any) -> dict[str, Any]:
                b = _bind(real.Image.from_dockerfile, *args, **kwargs).arguments
                assert Path(b["path"]).is_file() and Path(b["context_dir"]).is_dir()
                fake.images.append(dict(b))
                return dict(b)

        class Secret:
            @staticmethod
            def from_dict(*args: Any, **kwargs: Any) -> _Secret:
                env = _bind(real.Secret.from_dict, *args, **kwargs).arguments["env_dict"]
                assert all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())
                return _Secret(dict(env))

        class Sandbox:
            @staticmethod
            def create(*args: Any, **kwargs: Any) -> FakeSandbox:
                b = _bind(real.Sandbox.create, *args, **kwargs)
                assert all(isinstance(a, str) for a in b.arguments["args"]), (
                    "entrypoint arguments must be strings"
                )
                if b.arguments["gpu"] is not None:
                    parse_gpu_config(b.arguments["gpu"])  # modal's own check of the GPU string
                sb = FakeSandbox(b, fake)
                with fake._lock:
                    fake.sandboxes.append(sb)
                return sb

            @staticmethod
            def list(*args: Any, **kwargs: Any) -> list[FakeSandbox]:
                tags = _bind(real.Sandbox.list, *args, **kwargs).arguments["tags"] or {}
                with fake._lock:
                    return [s for s in fake.sandboxes if s.exit is None and tags.items() <= s.tags.items()]

        self.App, self.Image, self.Secret, self.Sandbox = App, Image, Secret, Sandbox
