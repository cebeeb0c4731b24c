"""Docker backend: the trusted scorer runs inside a locked-down container per worker (or per evaluation).

Each container: ``network_mode=none``, read-only root with sized tmpfs ``/tmp``, ``/sandbox`` and
``/dev/shm`` (the candidate's disk quota, see :func:`tmpfs_mounts`), all
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
import shutil
import socket
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.envs.manifest import Hardware
from harness.envs.registry import Variant
from harness.evaluation.errors import InfraError
from harness.evaluation.result import EvalResult
from harness.hardware.gpus import assign, evaluation_pool, host_gpus
from harness.images.naming import env_image_tag
from harness.inside import wire
from harness.scoring.device import OVERRIDE_ENV

from .prefork import ZygoteSpec
from .remote_pool import RemotePoolBackend
from .worker import Mode

log = logging.getLogger(__name__)
SOCKET_DIR = "/run/evobench"
LABEL = "evobench"
START_TIMEOUT_S = 120.0
TRUSTED_OVERHEAD_MB = 1536  # the in-container scorer process with torch imported
TRUSTED_DISK_MB = 512
"""Room in the container's ``/tmp`` for the trusted server's own files (the candidate's work
directory and the scorer's exchange files live there too), on top of the candidate's quota."""
DOCKER_GPUS_ENV = "EVOBENCH_DOCKER_GPUS"
"""GPU indices of a remote Docker daemon's machine (a local daemon's are read from ``/dev``)."""
GPU_CAPABILITIES = ["gpu", "compute", "utility"]
"""Device-request capabilities: the NVIDIA runtime mounts the CUDA driver (``compute``) and
``nvidia-smi`` (``utility``) whatever the base image's ``NVIDIA_DRIVER_CAPABILITIES`` says."""


def gpu_requests(hw: Hardware, slot: int, daemon_gpus: list[int], override: bool = False) -> list[Any] | None:
    """Docker device requests of a container for worker ``slot`` (None: no GPU).

    Each slot gets its own GPUs by id (``assign``, as the local backend hands them out) from the
    GPUs of the daemon's machine. Never ``DeviceRequest(count=k)``: the daemon answers it with
    GPUs 0..k-1 for every container, so all slots would time on the same GPUs.

    Args:
        hw: The variant's hardware spec.
        slot: Worker slot.
        daemon_gpus: GPU indices of the daemon's machine (see :func:`daemon_gpus`).
        override: ``EVOBENCH_GPU_OVERRIDE=1``: with no GPU there, run on CPU (the scorer marks it).

    Raises:
        InfraError: If that machine has fewer GPUs than the variant requests (none: unless overridden).
    """
    from docker.types import DeviceRequest

    if hw.gpu_count <= 0:
        return None
    ids = assign(hw.gpu_count, slot, daemon_gpus)
    if ids:
        return [DeviceRequest(device_ids=[str(i) for i in ids], capabilities=[GPU_CAPABILITIES])]
    if override:
        return None
    raise InfraError(
        f"the variant needs {hw.gpu_count} {hw.gpu} GPU(s) but the Docker daemon's machine has none; "
        f"set {OVERRIDE_ENV}=1 to run on CPU anyway (results are marked and not comparable)"
    )


def _local_daemon(client: Any) -> bool:
    """Whether the daemon listens on this machine's Unix socket, so its GPUs are this machine's.

    docker-py names a Unix socket ``http+docker://localhost`` and an SSH daemon
    ``http+docker://ssh`` (``api/client.py``): only the first is local. TCP daemons count as remote.
    """
    return str(getattr(client.api, "base_url", "")) == "http+docker://localhost"


def daemon_gpus(client: Any, env: dict[str, str] | None = None) -> list[int]:
    """GPU indices of the Docker daemon's machine: ``/dev/nvidia<N>`` here, else ``EVOBENCH_DOCKER_GPUS``.

    On a local daemon, GPUs a learning run's policy keeps (``EVOBENCH_AGENT_GPUS``) are left out.

    Raises:
        InfraError: If the daemon is remote and ``EVOBENCH_DOCKER_GPUS`` is unset or malformed.
    """
    if _local_daemon(client):  # never the GPU a learning run's policy keeps (EVOBENCH_AGENT_GPUS)
        return evaluation_pool(host_gpus(Path("/dev")), None if env is None else env)
    raw = (os.environ if env is None else env).get(DOCKER_GPUS_ENV, "").strip()
    where = str(getattr(client.api, "base_url", "?"))
    parts = [p.strip() for p in raw.split(",") if p.strip()]
    if not parts or not all(p.isdigit() for p in parts):
        raise InfraError(
            f"the Docker daemon ({where}) is not on this machine, so its GPUs cannot be listed from here: "
            f"set {DOCKER_GPUS_ENV} to the indices its containers may use, e.g. {DOCKER_GPUS_ENV}=0,1,2,3 "
            f"(got {raw!r})"
        )
    return [int(p) for p in parts]


def tmpfs_mounts(hw: Hardware) -> dict[str, str]:
    """Docker ``tmpfs`` mounts (path -> mount options): every path a candidate can write, sized.

    The root is read-only and ``/dev/shm`` is sized by ``shm_size``; ``/sandbox`` (a warm
    candidate's working directory) holds the disk quota ``hw.disk_mb``, and ``/tmp`` the quota plus
    the trusted server's room (:data:`TRUSTED_DISK_MB`): the candidate's work directory is made
    there. tmpfs pages count towards the container's memory limit, which is raised by
    :func:`tmpfs_total_mb` so that a full quota cannot make the container run out of memory.
    """
    opts = "rw,nosuid,nodev,mode=1777,size={}m"
    return {
        "/tmp": opts.format(hw.disk_mb + TRUSTED_DISK_MB),
        "/sandbox": opts.format(hw.disk_mb),
    }


def tmpfs_total_mb(hw: Hardware) -> int:
    """MiB all of a container's tmpfs mounts (:func:`tmpfs_mounts` and ``/dev/shm``) can hold."""
    return 3 * hw.disk_mb + TRUSTED_DISK_MB


def container_run_args(
    variant: Variant,
    *,
    image: str,
    command: list[str],
    sockdir: str,
    backend_id: str,
    slot: int = 0,
    cgroup_parent: str | None = None,
    gpus: list[int] | None = None,
    override: bool = False,
) -> dict[str, Any]:
    """Keyword arguments of ``containers.run`` for one evaluation container of ``variant``.

    Memory, CPUs and pids come from the variant's hardware spec (plus the trusted server's
    overhead); GPU variants request their GPUs (see :func:`gpu_requests`).

    Raises:
        InfraError: If this machine has GPUs but fewer than the variant requests.
    """
    from harness.envs.secret import KEY_ENV, key_env_value

    hw = variant.hardware
    # The trusted server draws secret held-out data with this installation's key, so local and
    # Docker score alike; candidates get an allow-listed environment and another uid, so neither
    # the variable nor the server's /proc/<pid>/environ reaches them.
    env = {"PYTHONHASHSEED": "0", KEY_ENV: key_env_value()}
    if hw.gpu_count > 0:
        env["NVIDIA_DRIVER_CAPABILITIES"] = "compute,utility"
    return {
        "image": image,
        "command": command,
        "detach": True,
        "network_mode": "none",
        "read_only": True,
        "tmpfs": tmpfs_mounts(hw),
        "shm_size": f"{hw.disk_mb}m",
        "volumes": {sockdir: {"bind": SOCKET_DIR, "mode": "rw"}},
        "mem_limit": f"{hw.memory_mb + TRUSTED_OVERHEAD_MB + tmpfs_total_mb(hw)}m",
        "nano_cpus": int(max(hw.cpus, 1.0) * 1e9),
        "pids_limit": hw.pids + 64,
        "cap_drop": ["ALL"],
        "cap_add": ["SETUID", "SETGID", "KILL"],
        "security_opt": ["no-new-privileges"],
        # The owner's pid tells whose containers these are when several runs share the daemon.
        "labels": {LABEL: "1", f"{LABEL}.backend": backend_id, f"{LABEL}.pid": str(os.getpid())},
        "device_requests": gpu_requests(hw, slot, gpus or [], override),
        "environment": env,
        "cgroup_parent": cgroup_parent,
    }


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
        try:
            client.images.get(image)  # never let `run` try to pull: images are built, not fetched
        except ImageNotFound as e:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            raise DockerInfraError(
                f"image {image} not found; build it with `bench images build --env {variant.base_id}`"
            ) from e
        try:
            gpus = daemon_gpus(client) if hw.gpu_count else []
            args = container_run_args(
                variant,
                image=image,
                command=cmd,
                sockdir=self.sockdir,
                backend_id=backend_id,
                slot=slot,
                cgroup_parent=cgroup_parent,
                gpus=gpus,
                override=os.environ.get(OVERRIDE_ENV) == "1",
            )
            self.container = client.containers.run(**args)
        except ImageNotFound as e:
            shutil.rmtree(self.sockdir, ignore_errors=True)
            raise DockerInfraError(
                f"image {image} not found; build it with `bench images build --env {variant.base_id}`"
            ) from e
        except (DockerException, InfraError) as e:
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
                    self.close()
                    raise DockerInfraError(f"evaluation container exited before it was ready:\n{logs}")
            time.sleep(0.01)
        self.close()
        raise DockerInfraError("evaluation container did not become ready in time")

    def evaluate(self, source: str, timeout_s: float, env_id: str = "") -> EvalResult:
        """Send one job and wait up to ``timeout_s`` for its result.

        Inside the container candidates always fork from the container's own fresh zygote;
        "cold" means a brand-new container per evaluation. ``env_id`` (default: the container's
        variant) may name a subset variant of the same base, which runs in the same image.

        Raises:
            TimeoutError: If no reply came in time.
            DockerInfraError: If the reply is malformed.
        """
        self.sock.settimeout(timeout_s)
        job = {"op": "evaluate", "env_id": env_id or self.variant.id, "source": source, "mode": "warm"}
        wire.send_message(self.sock, job)
        reply = wire.recv_message(self.sock, as_torch=False)
        if not isinstance(reply, dict) or reply.get("type") != "result":
            raise DockerInfraError(f"unexpected reply from the container: {str(reply)[:200]}")
        return EvalResult.model_validate_json(reply["result"])

    def close(self) -> None:
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


class DockerBackend(RemotePoolBackend):
    """Evaluate in containers built by ``bench images build`` (same conformance suite as local)."""

    name = "docker"
    infra_errors = (*RemotePoolBackend.infra_errors, DockerInfraError)

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
        super().__init__(workers, mode, infra_retries=infra_retries)
        self.prewarm = prewarm
        self.cgroup_parent = cgroup_parent
        self._client: Any = None

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

    def _start(self, variant: Variant, slot: int) -> _Container:
        warm = self.mode == "warm"
        # A cold container serves one job: pre-starting its zygote overlaps the two torch imports.
        return _Container(
            self._docker(),
            variant,
            slot,
            self.id,
            prewarm=(not warm) or variant.id in self.prewarm,
            one_shot=not warm,
            cgroup_parent=self.cgroup_parent,
        )

    def containers(self) -> list[Any]:
        """Containers of this backend still known to the daemon (for tests and janitors)."""
        return list(self._docker().containers.list(all=True, filters={"label": f"{LABEL}.backend={self.id}"}))

    def _janitor(self) -> None:
        if self._client is not None:
            for leftover in self.containers():
                leftover.remove(force=True)
