"""A faithful stand-in for Modal's servers: the same image, run by the local Docker daemon.

``FakeModalClient`` implements the backend's :class:`ModalClient` by starting ``docker run -i``
containers with what ``SandboxSpec`` asks of Modal (no network, CPU, memory, lifetime, tags) and
hands the backend the same ``_SdkProcess`` wrapper the real client uses, around a
``FakeSandbox`` that mimics the parts of ``modal.Sandbox`` it touches: ``stdin.write`` /
``stdin.drain``, ``stdout`` iterated in arbitrary chunks (as Modal's stream delivers them),
``poll``, ``stderr.read``, ``terminate`` and ``object_id``.
"""

from __future__ import annotations

import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

from harness.envs.manifest import Hardware
from harness.sandbox.docker_backend import tmpfs_mounts, tmpfs_total_mb
from harness.sandbox.modal_backend.client import ImageRecipe, ModalInfraError, RemoteProcess, SandboxSpec
from harness.sandbox.modal_backend.sdk import _SdkProcess

CHUNK = 777
"""Odd chunk size: protocol lines arrive split and joined arbitrarily, as over Modal's stream."""


class _Stdin:
    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe
        self._buf = bytearray()

    def write(self, data: bytes | str) -> None:
        self._buf += data.encode() if isinstance(data, str) else data

    def drain(self) -> None:
        data, self._buf = bytes(self._buf), bytearray()
        self._pipe.write(data)
        self._pipe.flush()


class _Stdout:
    def __init__(self, pipe: IO[bytes]) -> None:
        self._pipe = pipe

    def __iter__(self) -> Iterator[str]:
        while True:
            chunk = self._pipe.read1(CHUNK)  # type: ignore[attr-defined]
            if not chunk:
                return
            yield chunk.decode("utf-8", errors="replace")


class _Stderr:
    def __init__(self, sb: FakeSandbox) -> None:
        self._sb = sb

    def read(self) -> str:
        return self._sb.stderr_text()


class FakeSandbox:
    """One ``docker run -i`` container behaving like a ``modal.Sandbox``."""

    def __init__(self, spec: SandboxSpec, tag: str) -> None:
        self.object_id = "sb-" + uuid.uuid4().hex[:12]
        self.tags = dict(spec.tags)
        self.name = f"evobench-modal-fake-{self.object_id}"
        disk = Hardware(disk_mb=spec.disk_mb)  # sized like the Docker backend's containers
        cmd = [
            "docker", "run", "-i", "--rm", "--name", self.name,
            "--read-only",
            *[a for path, opts in tmpfs_mounts(disk).items() for a in ("--tmpfs", f"{path}:{opts}")],
            "--shm-size", f"{spec.disk_mb}m",
            "--memory", f"{spec.memory_mb + tmpfs_total_mb(disk)}m",
            "--cpus", str(spec.cpu),
            "--pids-limit", "256",
            "--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID", "--cap-add", "KILL",
            "--security-opt", "no-new-privileges",
            "--label", "evobench.modal-fake=1",
            "-e", "PYTHONHASHSEED=0",
            *[a for k, v in spec.env for a in ("-e", f"{k}={v}")],
        ]  # fmt: skip
        if spec.block_network:
            cmd += ["--network", "none"]
        if spec.gpu:
            count = spec.gpu.split(":")[1] if ":" in spec.gpu else "1"
            cmd += ["--gpus", count]
        self._proc = subprocess.Popen(
            [*cmd, tag, *spec.command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self._proc.stdin and self._proc.stdout and self._proc.stderr
        self.stdin = _Stdin(self._proc.stdin)
        self.stdout = _Stdout(self._proc.stdout)
        self.stderr = _Stderr(self)
        self._err = bytearray()
        self._drain = threading.Thread(target=self._read_err, daemon=True)
        self._drain.start()
        # Modal ends a sandbox at its lifetime limit whatever it is doing.
        self._lifetime = threading.Timer(spec.timeout_s, self.terminate)
        self._lifetime.daemon = True
        self._lifetime.start()

    def _read_err(self) -> None:
        assert self._proc.stderr
        for line in self._proc.stderr:
            self._err += line
            del self._err[:-65536]

    def stderr_text(self) -> str:
        return self._err.decode("utf-8", errors="replace")

    def poll(self) -> int | None:
        return self._proc.poll()

    def terminate(self) -> None:
        self._lifetime.cancel()
        if self._proc.poll() is None:
            subprocess.run(["docker", "rm", "-f", self.name], capture_output=True)
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()


@dataclass
class FakeModalClient:
    """The backend's ``ModalClient`` over local Docker; records every spec it was asked for."""

    credentials: bool = True
    specs: list[SandboxSpec] = field(default_factory=list)
    sandboxes: list[FakeSandbox] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def check_credentials(self) -> None:
        if not self.credentials:
            raise ModalInfraError("no Modal credentials found: run `modal token new`")

    def create_sandbox(self, spec: SandboxSpec, image: ImageRecipe) -> RemoteProcess:
        probe = subprocess.run(["docker", "image", "inspect", image.tag], capture_output=True)
        if probe.returncode != 0:
            raise ModalInfraError(f"ImageBuildError: no image {image.tag}")
        sb = FakeSandbox(spec, image.tag)
        with self._lock:
            self.specs.append(spec)
            self.sandboxes.append(sb)
        return _SdkProcess(sb)

    def list_sandboxes(self, tags: dict[str, str]) -> list[RemoteProcess]:
        with self._lock:
            live = [sb for sb in self.sandboxes if sb.poll() is None]
        return [_SdkProcess(sb) for sb in live if all(sb.tags.get(k) == v for k, v in tags.items())]
