"""Build tools inside the sandbox: ``load_inline`` and ``torch.compile`` as a candidate would call them.

On an H100 (docs/gpu-check.md) ``load_inline`` failed in the sandbox with "Ninja is required" (the
candidate's PATH had no ninja) and ``torch.compile`` with ``KeyError: getpwuid()`` (the sandbox uid
has no user name). The CPU twin of the CUDA case builds a C++ extension here; the CUDA one is
``gpu``-marked.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.envs.manifest import Hardware, Language
from harness.sandbox.gpus import GpuAccess
from harness.sandbox.isolation import UNPRIVILEGED_UID_BASE, bwrap_prefix, detect_isolation, sandbox_env
from harness.sandbox.runtime import SandboxedCandidate
from harness.sandbox.toolchain import SANDBOX_USER, cuda_home, interpreter_bin

PROGRAM = r'''
import getpass, os, shutil

def facts():
    return {"user": getpass.getuser(), "ninja": shutil.which("ninja") or "", "home": os.environ["HOME"]}

def build_cpp():
    import torch
    from torch.utils.cpp_extension import load_inline
    src = "torch::Tensor twice(torch::Tensor x) { return x * 2; }"
    mod = load_inline(name="evobench_twice", cpp_sources=[src], functions=["twice"], verbose=False)
    return mod.twice(torch.arange(4.0)).tolist()

def build_cuda():
    import torch
    from torch.utils.cpp_extension import load_inline
    cuda = (
        "__global__ void k(float* y, const float* x, int n) {"
        " int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }\n"
        "torch::Tensor twice(torch::Tensor x) { auto y = torch::empty_like(x);"
        " int n = x.numel(); k<<<(n + 255) / 256, 256>>>(y.data_ptr<float>(), x.data_ptr<float>(), n);"
        " return y; }"
    )
    cpp = "torch::Tensor twice(torch::Tensor x);"
    mod = load_inline(name="evobench_twice_cu", cpp_sources=[cpp], cuda_sources=[cuda], functions=["twice"])
    return mod.twice(torch.arange(4.0, device="cuda")).cpu().tolist()
'''

HW = Hardware(cpus=1.0, memory_mb=4096, pids=64, disk_mb=512)


def test_the_candidate_environment_names_a_user_and_the_interpreters_tools() -> None:
    env = sandbox_env(HW, UNPRIVILEGED_UID_BASE + 16 * 7 + 20)
    assert env["USER"] == env["LOGNAME"] == SANDBOX_USER
    assert interpreter_bin() in env["PATH"].split(":")
    assert not any(k.endswith(("KEY", "TOKEN", "SECRET")) for k in env)


def _start(hw: Hardware) -> SandboxedCandidate:
    if detect_isolation().level != "bwrap":
        pytest.skip("needs bubblewrap (the local sandbox's isolation)")
    return SandboxedCandidate(
        PROGRAM,
        language=Language.PYTHON,
        filename="candidate.py",
        hw=hw,
        deadline=time.monotonic() + 300,
        uid=UNPRIVILEGED_UID_BASE + 16 * 7 + 21,
        zygote=None,
    )


@pytest.fixture
def candidate() -> Iterator[SandboxedCandidate]:
    cand = _start(HW)
    yield cand
    cand.close()


def test_a_sandboxed_candidate_has_a_user_name_and_finds_ninja(candidate: SandboxedCandidate) -> None:
    facts = candidate.call("facts").value
    assert facts["user"] == SANDBOX_USER
    if shutil.which("ninja", path=interpreter_bin()):
        assert facts["ninja"], facts  # pip's ninja beside the interpreter is on the candidate's PATH


@pytest.mark.slow
def test_load_inline_builds_a_cpp_extension_as_a_sandboxed_candidate(candidate: SandboxedCandidate) -> None:
    if not shutil.which("ninja", path=interpreter_bin()):
        pytest.skip("ninja is not installed beside the interpreter (pip install ninja)")
    assert candidate.call("build_cpp", timeout=280).value == [0.0, 2.0, 4.0, 6.0]


@pytest.mark.gpu
def test_load_inline_builds_a_cuda_extension_as_a_sandboxed_candidate() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    cand = _start(Hardware(cpus=1.0, memory_mb=8192, pids=64, disk_mb=512, gpu="any", gpu_count=1))
    try:
        assert cand.call("build_cuda", timeout=280).value == [0.0, 2.0, 4.0, 6.0]
    finally:
        cand.close()


def test_a_gpu_sandbox_binds_the_cuda_toolkit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit = tmp_path / "cuda-13.0"
    (toolkit / "bin").mkdir(parents=True)
    monkeypatch.setenv("CUDA_HOME", str(toolkit))
    cuda_home.cache_clear()
    try:
        dev = tmp_path / "dev"
        dev.mkdir()
        access = GpuAccess((0,), (), ("/sys",), {"CUDA_VISIBLE_DEVICES": "0"})
        args = bwrap_prefix(workdir=None, uid=UNPRIVILEGED_UID_BASE + 16 * 7 + 22, gpus=access, dev_root=dev)
        i = args.index(str(toolkit))
        assert args[i - 1 : i + 2] == ["--ro-bind", str(toolkit), str(toolkit)]
        assert cuda_home() == str(toolkit)
    finally:
        cuda_home.cache_clear()
