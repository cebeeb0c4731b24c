"""GPU access of local sandboxes: which NVIDIA nodes a GPU variant's bubblewrap sandbox gets.

No GPU exists where these run, so the device tree is a fake directory of regular files; the
bubblewrap tests still start real sandboxes that bind those files as device nodes. The one test
with a real GPU is ``gpu``-marked.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.envs.manifest import Hardware
from harness.evaluation.errors import InfraError
from harness.hardware.gpus import assign, host_gpus
from harness.sandbox import isolation
from harness.sandbox.gpus import gpu_access, gpu_binds

GPU_HW = Hardware(cpus=1.0, memory_mb=2048, gpu="H100 SXM", gpu_count=1)
CPU_HW = Hardware(cpus=1.0, memory_mb=2048)


@pytest.fixture
def fake_dev(tmp_path: Path) -> Path:
    """A /dev with four GPUs, the control nodes, MIG caps and a node CUDA does not need."""
    dev = tmp_path / "dev"
    dev.mkdir()
    for name in ("nvidia0", "nvidia1", "nvidia2", "nvidia10", "nvidiactl", "nvidia-uvm", "nvidia-modeset"):
        (dev / name).write_text(name)
    (dev / "nvidia-caps").mkdir()
    (dev / "nvidia-caps" / "nvidia-cap1").write_text("cap")
    (dev / "null").write_text("")
    return dev


def test_host_gpus_sorted_numerically_and_filtered(fake_dev: Path) -> None:
    assert host_gpus(fake_dev, visible="") == [0, 1, 2, 10]
    assert host_gpus(fake_dev, visible="2,0") == [2, 0]
    assert host_gpus(fake_dev, visible="1,7") == [1]  # 7 does not exist here
    # UUIDs cannot be mapped to nodes without the driver: every node stays a candidate.
    assert host_gpus(fake_dev, visible="GPU-0b1c") == [0, 1, 2, 10]
    assert host_gpus(fake_dev.parent / "missing", visible="") == []


@given(
    k=st.integers(1, 4),
    n=st.integers(1, 9),
    slot=st.integers(0, 40),
)
def test_assign_gives_distinct_gpus_and_disjoint_blocks(k: int, n: int, slot: int) -> None:
    pool = list(range(100, 100 + n))
    if k > n:
        with pytest.raises(InfraError, match=f"requests {k} GPUs"):
            assign(k, slot, pool)
        return
    got = assign(k, slot, pool)
    assert len(got) == k and len(set(got)) == k and set(got) <= set(pool)
    blocks = n // k
    # The first `blocks` slots never share a GPU; later slots wrap around.
    others = [assign(k, s, pool) for s in range(blocks) if s != slot % blocks]
    assert all(not set(got) & set(o) for o in others)
    assert got == assign(k, slot % blocks, pool)


def test_no_gpu_requested_or_none_present(fake_dev: Path, tmp_path: Path) -> None:
    assert assign(0, 3, [0, 1]) == () and assign(1, 0, []) == ()
    assert gpu_access(CPU_HW, 0, dev_root=fake_dev, visible="") is None
    empty = tmp_path / "empty-dev"
    empty.mkdir()
    assert gpu_access(GPU_HW, 0, dev_root=empty, visible="") is None


def test_access_binds_only_the_slots_gpu(fake_dev: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    acc = gpu_access(GPU_HW, 1, dev_root=fake_dev, visible="")
    assert acc is not None and acc.indices == (1,)
    names = sorted(Path(n).name for n in acc.device_nodes)
    assert names == ["nvidia-caps", "nvidia-uvm", "nvidia1", "nvidiactl"]
    assert acc.env == {"CUDA_VISIBLE_DEVICES": "0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    binds = gpu_binds(acc, fake_dev)
    assert ("--dev-bind", str(fake_dev / "nvidia1"), "/dev/nvidia1") in binds
    assert ("--ro-bind-try", "/sys", "/sys") in binds
    two = gpu_access(GPU_HW.model_copy(update={"gpu_count": 2}), 1, dev_root=fake_dev, visible="")
    assert two is not None and two.indices == (2, 10) and two.env["CUDA_VISIBLE_DEVICES"] == "0,1"
    with pytest.raises(InfraError):
        gpu_access(GPU_HW.model_copy(update={"gpu_count": 5}), 0, dev_root=fake_dev, visible="")


def test_library_path_binds_skip_hidden_dirs(
    fake_dev: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    libs, secret = tmp_path / "driver-libs", tmp_path / "secret" / "lib"
    libs.mkdir()
    secret.mkdir(parents=True)
    monkeypatch.setenv("LD_LIBRARY_PATH", f"{libs}:{secret}:relative:/no/such/dir")
    acc = gpu_access(GPU_HW, 0, dev_root=fake_dev, visible="", hidden=[tmp_path / "secret"])
    assert acc is not None
    assert acc.ro_paths == ("/sys", str(libs.resolve()))
    assert acc.env["LD_LIBRARY_PATH"] == str(libs.resolve())


def _bwrap_or_skip() -> None:
    if isolation.detect_isolation().level != "bwrap":
        pytest.skip("bubblewrap is not usable here")


def _with_fake_dev(monkeypatch: pytest.MonkeyPatch, dev: Path) -> None:
    fake = functools.partial(gpu_access, dev_root=dev, visible="")
    monkeypatch.setattr(isolation, "gpu_access", fake)
    real_prefix = isolation.bwrap_prefix
    monkeypatch.setattr(isolation, "bwrap_prefix", functools.partial(real_prefix, dev_root=dev))


PROBE = (
    "import os, socket\n"
    "devs = sorted(n for n in os.listdir('/dev') if n.startswith('nvidia'))\n"
    "try:\n"
    "    socket.create_connection(('1.1.1.1', 53), timeout=2); net = 'net'\n"
    "except OSError:\n"
    "    net = 'nonet'\n"
    "print(','.join(devs), os.environ.get('CUDA_VISIBLE_DEVICES', '-'), net, os.path.isdir('/sys/bus'))\n"
)


def _probe(hw: Hardware, uid: int) -> list[str]:
    cmd = isolation.sandbox_command(["{python}", "-I", "-c", PROBE], workdir=None, uid=uid, hw=hw)
    out = subprocess.run(
        cmd, env=isolation.sandbox_env(hw, uid), capture_output=True, text=True, timeout=60, check=True
    )
    return out.stdout.split()


def test_real_sandbox_sees_only_its_gpu_nodes(fake_dev: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _bwrap_or_skip()
    _with_fake_dev(monkeypatch, fake_dev)
    slot2 = isolation.UNPRIVILEGED_UID_BASE + 2 * isolation.UIDS_PER_BACKEND + 2  # worker index 2
    devs, visible, net, sys_bus = _probe(GPU_HW, slot2)
    assert devs.split(",") == ["nvidia-caps", "nvidia-uvm", "nvidia2", "nvidiactl"]
    assert visible == "0" and net == "nonet" and sys_bus == "True"
    # A CPU variant's sandbox gets neither nodes nor /sys nor CUDA variables.
    assert _probe(CPU_HW, slot2) == ["-", "nonet", "False"]  # no nvidia* names: an empty first field


def test_cpu_variant_command_has_no_gpu_binds(fake_dev: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _with_fake_dev(monkeypatch, fake_dev)
    cmd = isolation.sandbox_command(["{python}", "-c", "0"], workdir=None, uid=61000, hw=CPU_HW)
    assert not any("nvidia" in a for a in cmd)
    assert not any(cmd[i : i + 3] == ["--ro-bind-try", "/sys", "/sys"] for i in range(len(cmd)))
    assert "CUDA_VISIBLE_DEVICES" not in isolation.sandbox_env(CPU_HW, 61000)


@pytest.mark.gpu
def test_cuda_torch_runs_inside_the_local_sandbox() -> None:
    """On a GPU machine: CUDA torch in a bubblewrap sandbox sees exactly the variant's GPUs."""
    _bwrap_or_skip()
    code = (
        "import torch\n"
        "assert torch.cuda.is_available(), 'no CUDA in the sandbox'\n"
        "x = torch.randn(256, 256, device='cuda')\n"
        "print(torch.cuda.device_count(), float((x @ x).sum().isfinite()))\n"
    )
    uid = isolation.UNPRIVILEGED_UID_BASE
    cmd = isolation.sandbox_command(["{python}", "-c", code], workdir=None, uid=uid, hw=GPU_HW)
    out = subprocess.run(
        cmd, env=isolation.sandbox_env(GPU_HW, uid), capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "1.0"]


def test_a_gpu_memory_plan_reaches_the_sandbox(fake_dev: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GPU 0 is the learning agent's (issue 32 item 7): slots get 1, 2, 10; a share caps the allocator.
    monkeypatch.setenv("EVOBENCH_AGENT_GPUS", "0")
    slots = [gpu_access(GPU_HW, s, dev_root=fake_dev, visible="") for s in range(4)]
    assert [a.indices if a else () for a in slots] == [(1,), (2,), (10,), (1,)]
    access = gpu_access(GPU_HW, 0, dev_root=fake_dev, visible="")
    assert access is not None and "PYTORCH_CUDA_ALLOC_CONF" not in access.env
    monkeypatch.setenv("EVOBENCH_EVAL_GPU_FRACTION", "0.25")
    access = gpu_access(GPU_HW, 0, dev_root=fake_dev, visible="")
    assert access is not None and access.env["PYTORCH_CUDA_ALLOC_CONF"] == "per_process_memory_fraction:0.25"
