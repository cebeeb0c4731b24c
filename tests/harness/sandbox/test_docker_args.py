"""What the Docker backend asks the daemon for: resources from the hardware spec, GPUs by slot.

The argument builder is tested without a daemon or GPU; starting real containers is covered by
the ``docker``-marked tests.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from harness.envs.manifest import Hardware
from harness.envs.registry import Variant, default_registry
from harness.evaluation.errors import InfraError
from harness.sandbox.docker_backend import (
    DOCKER_GPUS_ENV,
    GPU_CAPABILITIES,
    TRUSTED_DISK_MB,
    TRUSTED_OVERHEAD_MB,
    container_run_args,
    daemon_gpus,
    tmpfs_total_mb,
)


def _args(
    variant: Variant, slot: int = 0, local_gpus: list[int] | None = None, override: bool = False
) -> dict:  # type: ignore[type-arg]
    return container_run_args(
        variant,
        image="evobench/env-x:1",
        command=["python", "-P", "-m", "harness.sandbox.container_boot"],
        sockdir="/tmp/sock",
        backend_id="b1",
        slot=slot,
        gpus=local_gpus,
        override=override,
    )


@pytest.mark.parametrize("env_id", ["trimul-h100", "mla-decode-h200"])
def test_gpu_variant_requests_its_gpus_and_resources(env_id: str) -> None:
    v = default_registry().get(env_id)
    hw = v.hardware
    assert hw.gpu_count >= 1
    remote = _args(v, slot=2, local_gpus=[0, 1, 2, 3])  # e.g. EVOBENCH_DOCKER_GPUS=0,1,2,3
    (req,) = remote["device_requests"]
    assert req["DeviceIDs"] == ["2"] and not req.get("Count")  # never count=k (GPUs 0..k-1 for all)
    assert req["Capabilities"] == [GPU_CAPABILITIES] and "gpu" in GPU_CAPABILITIES
    assert remote["environment"]["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert remote["mem_limit"] == f"{hw.memory_mb + TRUSTED_OVERHEAD_MB + tmpfs_total_mb(hw)}m"
    assert remote["nano_cpus"] == int(hw.cpus * 1e9) and remote["pids_limit"] == hw.pids + 64
    # Isolation is the same as for CPU variants.
    assert remote["network_mode"] == "none" and remote["read_only"] is True
    assert remote["cap_drop"] == ["ALL"] and remote["security_opt"] == ["no-new-privileges"]
    local = _args(v, slot=1, local_gpus=[0, 1, 2, 3])
    (req,) = local["device_requests"]
    assert req["DeviceIDs"] == ["1"] and not req.get("Count")


def test_slots_get_disjoint_gpus_on_a_local_daemon() -> None:
    v = default_registry().get("trimul-h100")
    two = dataclasses.replace(v, hardware=v.hardware.model_copy(update={"gpu_count": 2}))
    ids = [_args(two, slot=s, local_gpus=[0, 1, 2, 3])["device_requests"][0]["DeviceIDs"] for s in range(3)]
    assert ids == [["0", "1"], ["2", "3"], ["0", "1"]]
    with pytest.raises(InfraError, match="requests 2 GPUs but this machine offers 1"):
        _args(two, local_gpus=[0])


def test_no_gpu_on_the_daemons_machine_is_refused_unless_overridden() -> None:
    v = default_registry().get("trimul-h100")
    with pytest.raises(InfraError, match="EVOBENCH_GPU_OVERRIDE"):
        _args(v, local_gpus=[])
    assert _args(v, local_gpus=[], override=True)["device_requests"] is None  # CPU run, marked by the scorer


def _client(base_url: str) -> SimpleNamespace:
    return SimpleNamespace(api=SimpleNamespace(base_url=base_url))


@pytest.mark.parametrize("url", ["http+docker://ssh", "http://10.0.0.5:2375", "https://gpu-box:2376"])
def test_remote_daemons_need_their_gpu_list(url: str) -> None:
    # docker-py: unix socket -> http+docker://localhost, ssh:// -> http+docker://ssh (api/client.py).
    with pytest.raises(InfraError, match=DOCKER_GPUS_ENV):
        daemon_gpus(_client(url), env={})
    with pytest.raises(InfraError, match=DOCKER_GPUS_ENV):
        daemon_gpus(_client(url), env={DOCKER_GPUS_ENV: "GPU-1234"})
    assert daemon_gpus(_client(url), env={DOCKER_GPUS_ENV: "4, 5,6"}) == [4, 5, 6]


def test_local_daemon_reads_this_machines_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.sandbox.docker_backend as db

    monkeypatch.setattr(db, "host_gpus", lambda dev: [0, 1])
    assert daemon_gpus(_client("http+docker://localhost"), env={DOCKER_GPUS_ENV: "7"}) == [0, 1]
    # a learning run's policy keeps GPU 0 (agents/learning/gpu_plan.py): containers get only GPU 1
    assert daemon_gpus(_client("http+docker://localhost"), env={"EVOBENCH_AGENT_GPUS": "0"}) == [1]


def test_cpu_variant_requests_no_gpu() -> None:
    v = default_registry().get("trimul-tiny")
    a = _args(v, local_gpus=[0, 1])
    assert a["device_requests"] is None and "NVIDIA_DRIVER_CAPABILITIES" not in a["environment"]
    assert a["mem_limit"] == f"{v.hardware.memory_mb + TRUSTED_OVERHEAD_MB + tmpfs_total_mb(v.hardware)}m"
    custom = dataclasses.replace(v, hardware=Hardware(cpus=0.5, memory_mb=100, pids=8))
    b = _args(custom)
    assert b["nano_cpus"] == int(1e9) and b["pids_limit"] == 72  # at least one core


def test_the_trusted_server_gets_this_installations_heldout_key_and_candidates_do_not(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.envs.secret import KEY_ENV, installation_key
    from harness.sandbox.isolation import candidate_env

    monkeypatch.setenv("EVOBENCH_DATA", str(tmp_path))
    monkeypatch.delenv(KEY_ENV, raising=False)
    a = _args(default_registry().get("eplb-tiny"), local_gpus=[])
    # Local and Docker draw the same secret held-out data (they scored differently before).
    assert a["environment"][KEY_ENV] == installation_key().hex()
    monkeypatch.setenv(KEY_ENV, a["environment"][KEY_ENV])
    assert KEY_ENV not in candidate_env(1.0)


def test_every_writable_path_is_a_sized_tmpfs() -> None:
    """The candidate's disk quota: /tmp, /sandbox and /dev/shm are sized from ``disk_mb``."""
    v = default_registry().get("trimul-tiny")
    custom = dataclasses.replace(v, hardware=Hardware(cpus=1, memory_mb=1000, disk_mb=100))
    a = _args(custom)
    assert a["read_only"] is True  # nothing else is writable
    assert a["tmpfs"] == {
        "/tmp": f"rw,nosuid,nodev,mode=1777,size={100 + TRUSTED_DISK_MB}m",
        "/sandbox": "rw,nosuid,nodev,mode=1777,size=100m",
    }
    assert a["shm_size"] == "100m"
    # The tmpfs pages count in the container's memory: its limit has room for all of them.
    assert a["mem_limit"] == f"{1000 + TRUSTED_OVERHEAD_MB + 3 * 100 + TRUSTED_DISK_MB}m"
