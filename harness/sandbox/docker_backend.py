"""Docker backend: the trusted scorer runs inside a locked-down container per worker (or per evaluation).

Each container: ``network_mode=none``, read-only root with tmpfs ``/tmp`` and ``/sandbox``, all
capabilities dropped but SETUID / SETGID / KILL (so the in-container server can start candidates
as an unprivileged uid and kill them), ``no-new-privileges``, memory / CPU / pids limits from the
variant's hardware spec, GPU device requests for GPU variants. The host talks to the in-container
server (``harness.sandbox.container_main``) over a Unix socket in a host directory mounted at
``/run/evobench``. Modes: ``cold`` = a fresh container per evaluation; ``warm`` = one long-lived
container per worker slot and variant, whose server forks fresh candidates from a clean zygote.
Containers are labelled ``evobench=1`` and always removed (also on Ctrl-C and errors).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import socket
import tempfile
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from harness.envs.registry import Variant
from harness.evaluation.result import EvalResult, Status, program_sha256
from harness.images.naming import env_image_tag

from . import wire
from .base import Sandbox
from .prefork import ZygoteSpec
from .worker import Mode

log = logging.getLogger(__name__)
SOCKET_DIR = "/run/evobench"
LABEL = "evobench"
START_TIMEOUT_S = 120.0
TRUSTED_OVERHEAD_MB = 1536  # the in-container scorer process with torch imported
GRACE_S = 15.0


class DockerInfraError(RuntimeError):
    """The daemon, an image or a container failed (never the candidate's fault)."""


class _Container:
    """One running evaluation container and the socket to its trusted server."""

    def __init__(
        self,
        client: Any,
        variant: Variant,
        slot: int,
        backend_id: str,
        prewarm: bool,
        one_shot: bool = False,
        cgroup_parent: str | None = None,
    ) -> None:
        from docker.errors import DockerException, ImageNotFound
        from docker.types import DeviceRequest

        self.variant = variant
        self.sockdir = tempfile.mkdtemp(prefix="evobench-sock-")
        os.chmod(self.sockdir, 0o700)
        image = env_image_tag(variant)
        hw = variant.hardware
        # -P: the working directory (/sandbox, writable by candidates) must never be on the
        # trusted server's import path.
        cmd = [
            "python",
            "-P",
            "-m",
            "harness.sandbox.container_boot",
            "--socket",
            f"{SOCKET_DIR}/w.sock",
            "--slot",
            str(slot),
        ]
        if prewarm:
            # The server forks the zygote after importing torch once (see prefork); a one-shot
            # (cold) container's zygote serves one candidate, so huge pages would not pay off.
            spec = ZygoteSpec(hw, variant.preload, collapse=not one_shot)
            cmd += ["--prewarm", variant.id, "--zygote", spec.to_json()]
        devices = [DeviceRequest(count=hw.gpu_count, capabilities=[["gpu"]])] if hw.gpu_count else None
        try:
            client.images.get(image)  # never let `run` try to pull: images are built, not fetched
        except ImageNotFound as e:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            raise DockerInfraError(
                f"image {image} not found; build it with `bench images build --env {variant.id}`"
            ) from e
        try:
            self.container = client.containers.run(
                image,
                cmd,
                detach=True,
                network_mode="none",
                read_only=True,
                tmpfs={
                    "/tmp": "rw,nosuid,nodev,size=1g,mode=1777",
                    "/sandbox": "rw,nosuid,nodev,size=1g,mode=1777",
                },
                volumes={self.sockdir: {"bind": SOCKET_DIR, "mode": "rw"}},
                mem_limit=f"{hw.memory_mb + TRUSTED_OVERHEAD_MB}m",
                nano_cpus=int(max(hw.cpus, 1.0) * 1e9),
                pids_limit=hw.pids + 64,
                cap_drop=["ALL"],
                cap_add=["SETUID", "SETGID", "KILL"],
                security_opt=["no-new-privileges"],
                labels={LABEL: "1", f"{LABEL}.backend": backend_id},
                device_requests=devices,
                environment={"PYTHONHASHSEED": "0"},
                cgroup_parent=cgroup_parent,
            )
        except ImageNotFound as e:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            raise DockerInfraError(
                f"image {image} not found; build it with `bench images build --env {variant.id}`"
            ) from e
        except DockerException as e:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            raise DockerInfraError(f"could not start a container from {image}: {e}") from e
        self.sock = self._connect()

    def _connect(self) -> socket.socket:
        path = os.path.join(self.sockdir, "w.sock")
        deadline = time.monotonic() + START_TIMEOUT_S
        next_check = time.monotonic() + 0.5
        while time.monotonic() < deadline:
            if os.path.exists(path):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    s.connect(path)
                    return s
                except OSError:
                    s.close()
            # The socket appears within ~10 ms; asking the daemon (an API round trip) is slower,
            # so whether the container died is checked twice a second only.
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + 0.5
                self.container.reload()
                if self.container.status in ("exited", "dead"):
                    logs = self.container.logs(tail=30).decode(errors="replace")
                    self.remove()
                    raise DockerInfraError(f"evaluation container exited before it was ready:\n{logs}")
            time.sleep(0.01)
        self.remove()
        raise DockerInfraError("evaluation container did not become ready in time")

    def evaluate(self, source: str, mode: Mode) -> EvalResult:
        """Send one job and wait for its result (the variant's timeout plus a grace period)."""
        self.sock.settimeout(self.variant.timeout_s + GRACE_S)
        wire.send_message(
            self.sock, {"op": "evaluate", "env_id": self.variant.id, "source": source, "mode": mode}
        )
        reply = wire.recv_message(self.sock, as_torch=False)
        if not isinstance(reply, dict) or reply.get("type") != "result":
            raise DockerInfraError(f"unexpected reply from the container: {str(reply)[:200]}")
        return EvalResult.model_validate_json(reply["result"])

    def remove(self) -> None:
        """Kill and remove the container; idempotent."""
        try:
            self.sock.close()
        except (AttributeError, OSError):
            pass
        try:
            self.container.remove(force=True)
        except Exception as e:  # noqa: BLE001 - already gone or daemon down: nothing else to do
            log.debug("container removal: %s", e)
        shutil.rmtree(self.sockdir, ignore_errors=True)


class DockerBackend(Sandbox):
    """Evaluate in containers built by ``bench images build`` (same conformance suite as local)."""

    name = "docker"

    def __init__(
        self,
        workers: int | None = None,
        mode: Mode = "warm",
        *,
        infra_retries: int = 2,
        prewarm: tuple[str, ...] = (),
        cgroup_parent: str | None = None,
    ) -> None:
        """Connect to the daemon lazily; containers start on first use.

        Args:
            workers: Parallel containers (default: number of cores).
            mode: ``warm`` (long-lived container per worker) or ``cold`` (container per evaluation).
            infra_retries: Extra attempts after an infra error (backoff 0.5 s, 1 s, ...).
            prewarm: Variant ids whose containers pre-import and pre-start their zygote.
            cgroup_parent: Parent cgroup of the containers (e.g. to account their CPU time).
        """
        self.workers = workers or os.cpu_count() or 1
        self.mode: Mode = mode
        self.infra_retries = infra_retries
        self.prewarm = prewarm
        self.cgroup_parent = cgroup_parent
        self.id = uuid.uuid4().hex[:12]
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="docker-eval")
        self._slots: queue.Queue[int] = queue.Queue()
        for i in range(self.workers):
            self._slots.put(i)
        self._warm: dict[tuple[int, str], _Container] = {}
        self._live: set[_Container] = set()
        self._lock = threading.Lock()
        self._client: Any = None
        self._closed = False

    def _docker(self) -> Any:
        if self._client is None:
            import docker

            try:
                self._client = docker.from_env()
                self._client.ping()
            except Exception as e:  # noqa: BLE001
                self._client = None
                raise DockerInfraError(f"Docker daemon not reachable ({e}); start dockerd") from e
        return self._client

    def submit(self, variant: Variant, source: str) -> Future[EvalResult]:
        """Queue one evaluation; the future resolves to an ``EvalResult`` (never raises)."""
        if self._closed:
            raise RuntimeError("backend is closed")
        return self._pool.submit(self._run, variant, source)

    def _run(self, variant: Variant, source: str) -> EvalResult:
        last = ""
        for attempt in range(1, self.infra_retries + 2):
            if self._closed:
                break
            slot = self._slots.get()
            try:
                res = self._once(variant, source, slot)
                if res.status is not Status.INFRA_ERROR:
                    return res.model_copy(update={"attempts": attempt, "backend": self.name})
                last = res.reason
            except (DockerInfraError, OSError, EOFError, wire.WireError) as e:
                last = f"{type(e).__name__}: {e}"
            finally:
                self._slots.put(slot)
            log.warning(
                "docker infra error (attempt %d): %s", attempt, last.splitlines()[0][:200] if last else ""
            )
            time.sleep(0.5 * 2 ** (attempt - 1))
        return EvalResult(
            status=Status.INFRA_ERROR,
            reason=last or "backend closed",
            env_id=variant.id,
            env_version=variant.version,
            env_hash=variant.hash,
            program_sha256=program_sha256(source),
            backend=self.name,
            attempts=self.infra_retries + 1,
        )

    def _once(self, variant: Variant, source: str, slot: int) -> EvalResult:
        warm = self.mode == "warm"
        key = (slot, variant.id)
        c = self._warm.get(key) if warm else None
        if c is None:
            # A cold container serves one job: pre-starting its zygote overlaps the two torch imports.
            prewarm = (not warm) or variant.id in self.prewarm
            c = _Container(
                self._docker(),
                variant,
                slot,
                self.id,
                prewarm=prewarm,
                one_shot=not warm,
                cgroup_parent=self.cgroup_parent,
            )
            with self._lock:
                self._live.add(c)
                if warm:
                    self._warm[key] = c
        try:
            # Inside the container candidates always fork from the container's own fresh zygote;
            # "cold" means a brand-new container per evaluation.
            return c.evaluate(source, "warm")
        except TimeoutError:
            self._discard(key, c)
            return EvalResult(
                status=Status.TIMEOUT,
                reason=f"no result within {variant.timeout_s + GRACE_S:.0f} s; container killed",
                env_id=variant.id,
                env_version=variant.version,
                env_hash=variant.hash,
                program_sha256=program_sha256(source),
                backend=self.name,
            )
        except BaseException:
            self._discard(key, c)
            raise
        finally:
            if not warm:
                self._discard(key, c)

    def _discard(self, key: tuple[int, str], c: _Container) -> None:
        with self._lock:
            self._live.discard(c)
            if self._warm.get(key) is c:
                del self._warm[key]
        c.remove()

    def containers(self) -> list[Any]:
        """Containers of this backend still known to the daemon (for tests and janitors)."""
        return list(self._docker().containers.list(all=True, filters={"label": f"{LABEL}.backend={self.id}"}))

    def close(self) -> None:
        """Finish queued jobs, then remove every container."""
        self._pool.shutdown(wait=True)
        self._remove_all()

    def terminate(self) -> None:
        """Drop queued jobs and remove every container now."""
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._remove_all()

    def _remove_all(self) -> None:
        self._closed = True
        with self._lock:
            live, self._live = list(self._live), set()
            self._warm.clear()
        for c in live:
            c.remove()
        if self._client is not None:
            try:
                for leftover in self.containers():
                    leftover.remove(force=True)
            except Exception as e:  # noqa: BLE001
                log.debug("janitor: %s", e)
